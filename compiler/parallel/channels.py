"""Channel parallelism for convolutional layers: the layout rules of Conv, pools, LRN and BatchNormalization, on top
of compiler/parallel/layout.py's (which `decide` falls back on for every other op).

A Conv with a weight and a whole input is column-parallel over its output channels (weight and bias split on them,
output S(channel)); a non-grouped Conv whose input is S(channel) all-gathers it first (conv3 of AlexNet reads every
map of both GPUs, Krizhevsky et al. 2012 fig. 2); a grouped Conv whose group count the degree divides runs on its
ranks' own groups (input S(channel), weight split on output channels, group divided by the degree: conv2, conv4 and
conv5 never leave their GPU). Pools and BatchNormalization work per channel, so a channel split carries through.
LRN sums over a window of neighbouring channels: split on them it gathers, unless the split follows the model's own
groups (Site.grouped), where, as cuda-convnet ran AlexNet, each rank normalises its own channels alone.
Invariant: as layout.py's; with `grouped`, an LRN over a channel split is the model's LRN applied per rank's slice.
"""
from __future__ import annotations

from compiler.parallel.layout import Decision, R, S, Site, decide as decide_layout, keep_split, replicated

CHANNEL = 1      # NCHW


def decide(site: Site) -> Decision:
    rule = RULES.get(site.node.op)
    return rule(site) if rule else decide_layout(site)


def conv(site: Site) -> Decision:
    node = site.node
    if site.static[0] or not site.static[1] or site.ins[0].kind == "L":
        return replicated(site)
    groups = int(node.attr("group", 1))
    split = [None, S(0)] + [S(0) if name else None for name in node.inputs[2:]]     # kernels and bias by channel
    if groups > 1:
        if groups % site.tp:
            return replicated(site)
        # each rank its own groups: their input maps, their kernels (group g's are rows g*K/G.. of the weight)
        return Decision([S(CHANNEL)] + split[1:], [S(CHANNEL)], {"group": groups // site.tp})
    if not site.column(node, site.out_shapes[0][CHANNEL]):
        return replicated(site)
    return Decision([R] + split[1:], [S(CHANNEL)])      # an S(channel) input is all-gathered: every map is read


def pool(site: Site) -> Decision:
    if len([o for o in site.node.outputs if o]) > 1:
        return replicated(site)         # MaxPool's indices count over the whole tensor, not the rank's slice
    return keep_split(site, lambda a: a < 2)


def lrn(site: Site) -> Decision:
    # cuda-convnet's two-GPU AlexNet normalised each GPU's maps separately (the window stops at the split); the
    # model as written normalises across it, so without `grouped` a channel split is gathered first.
    return keep_split(site, lambda a: a != CHANNEL or site.grouped)


def batch_norm(site: Site) -> Decision:
    x = site.ins[0]
    per_channel = len(site.in_shape(1)) == 1           # spatial=0 normalises per activation
    if x.kind == "S" and x.axis == CHANNEL and per_channel:
        wants = [None] + [S(0)] * (len(site.ins) - 1)
        return Decision(wants, [S(CHANNEL)] + [S(0)] * (len(site.out_shapes) - 1))   # y, running statistics
    return replicated(site)


RULES = {"Conv": conv, "MaxPool": pool, "AveragePool": pool, "GlobalMaxPool": pool, "GlobalAveragePool": pool,
         "LpPool": pool, "GlobalLpPool": pool, "LRN": lrn, "BatchNormalization": batch_norm}
