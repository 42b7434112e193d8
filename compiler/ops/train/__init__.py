"""Ops a training step adds, in the domain `ai.accelsim.training` (they are not ONNX ops): the gradients the backward
pass needs beyond ONNX's own ops (an activation's derivative, a convolution's data and filter gradients, a
normalisation's), and the optimizers' updates. Each has a numpy reference and lowers to IR ops like any other.
"""
