"""PyTorch models for the import tests, exported with the legacy (TorchScript) exporter.

torch is imported lazily (pytest.importorskip) so the suites that use these still run without it.
"""
import warnings

import pytest


def torch_models(opset: int):
    """name -> (module in eval mode, example input); built lazily so the file imports without torch."""
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch.manual_seed(0)

    class LRNFunction(torch.autograd.Function):
        """torch writes LocalResponseNorm as Pad + AveragePool; this exports the ONNX LRN op itself."""

        @staticmethod
        def forward(ctx, x):
            return nn.functional.local_response_norm(x, 5, alpha=1e-4, beta=0.75, k=2.0)

        @staticmethod
        def symbolic(g, x):
            return g.op("LRN", x, size_i=5, alpha_f=1e-4, beta_f=0.75, bias_f=2.0)

    class LRN(nn.Module):
        def forward(self, x):
            return LRNFunction.apply(x)

    class Attention(nn.Module):
        """Pre-norm transformer block, attention written out: Reshape/Transpose/MatMul/Softmax."""

        def __init__(self, dim=32, heads=4):
            super().__init__()
            # torch exports MultiheadAttention (unflatten, fused attention) only from opset 14
            self.use_mha = opset >= 14
            self.heads, self.norm1, self.norm2 = heads, nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
            self.mha = nn.MultiheadAttention(dim, heads, batch_first=True)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.norm1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
            h = self.norm2(x)
            if self.use_mha:
                x = x + self.mha(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.norm2(x))

    # The exporter folds a BatchNorm that follows a Conv into it; the one after MaxPool stays a node.
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                        nn.BatchNorm2d(8), nn.Conv2d(8, 16, 3, stride=2), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    alexnet = nn.Sequential(nn.Conv2d(3, 16, 5, stride=2, padding=2), nn.ReLU(), LRN(),
                            nn.MaxPool2d(3, 2), nn.Conv2d(16, 32, 3, padding=1, groups=2), nn.ReLU(),
                            LRN(), nn.MaxPool2d(3, 2), nn.Flatten(), nn.Dropout(0.5),
                            nn.Linear(32 * 3 * 3, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 10))
    for module in (cnn[1], cnn[4]):  # running statistics away from (0, 1) so BatchNorm does something
        module.running_mean.uniform_(-0.5, 0.5)
        module.running_var.uniform_(0.5, 2.0)
    models = {"cnn": (cnn, torch.randn(2, 3, 16, 16)), "transformer": (Attention(), torch.randn(2, 8, 32)),
              "alexnet": (alexnet, torch.randn(2, 3, 32, 32))}
    return {name: (module.eval(), x) for name, (module, x) in models.items()}


def export(tmp_path, name, opset, dynamic_batch=False):
    torch = pytest.importorskip("torch")
    module, x = torch_models(opset)[name]
    path = tmp_path / f"{name}_{opset}.onnx"
    axes = {"x": {0: "batch"}, "y": {0: "batch"}} if dynamic_batch else None
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # the fused MHA kernel has no ONNX export
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the legacy exporter's deprecation and tracer warnings
            torch.onnx.export(module, (x,), str(path), dynamo=False, opset_version=opset,
                              input_names=["x"], output_names=["y"], dynamic_axes=axes)
            expected = module(x).numpy()
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)
    return path, x.numpy(), expected
