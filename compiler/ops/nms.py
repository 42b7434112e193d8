"""NonMaxSuppression: per batch entry and class, boxes taken greedily by falling score (equal scores: lower index
first), each kept unless its IoU with a box already kept exceeds iou_threshold; at most max_output_boxes_per_class
per class, only scores above score_threshold when one is given. Output rows (batch, class, box), int64.

How many boxes survive depends on the values: the op evaluates but cannot be simulated (a constant input folds).
Invariant: the stand-in shape is the largest possible, every class keeping its maximum.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, fail, out, register, require
from compiler.ops.runtime import forget_stand_in, known_input, require_static, stand_in


def corners(boxes: np.ndarray, center: bool) -> np.ndarray:
    """[..., (y_min, x_min, y_max, x_max)] from [y1, x1, y2, x2] in any order, or [x_c, y_c, w, h]."""
    if center:
        half_w, half_h = boxes[..., 2] / 2, boxes[..., 3] / 2
        return np.stack([boxes[..., 1] - half_h, boxes[..., 0] - half_w, boxes[..., 1] + half_h,
                         boxes[..., 0] + half_w], axis=-1)
    return np.stack([np.minimum(boxes[..., 0], boxes[..., 2]), np.minimum(boxes[..., 1], boxes[..., 3]),
                     np.maximum(boxes[..., 0], boxes[..., 2]), np.maximum(boxes[..., 1], boxes[..., 3])], axis=-1)


def suppresses(kept: np.ndarray, box: np.ndarray, threshold: Any) -> bool:
    """Whether any kept box overlaps `box` by an IoU above the threshold (touching or empty boxes never do)."""
    if not len(kept):
        return False
    low = np.maximum(kept[:, :2], box[:2])
    high = np.minimum(kept[:, 2:], box[2:])
    overlap = np.all(high > low, axis=1)
    inter = (high[:, 0] - low[:, 0]) * (high[:, 1] - low[:, 1])
    area_kept = (kept[:, 2] - kept[:, 0]) * (kept[:, 3] - kept[:, 1])
    area_box = (box[2] - box[0]) * (box[3] - box[1])
    union = area_kept + area_box - inter
    valid = overlap & (inter > 0) & (area_kept > 0) & (area_box > 0) & (union > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / union
    return bool(np.any(valid & (iou > threshold)))


def scalar(value: ArrayLike | None, default: Any) -> Any:
    values = None if value is None else np.asarray(value).reshape(-1)
    return default if values is None or values.size == 0 else values[0]


def nms(node: Node, boxes: np.ndarray, scores: np.ndarray, limit: ArrayLike | None = None,
        iou: ArrayLike | None = None, floor: ArrayLike | None = None) -> np.ndarray:
    most = max(int(scalar(limit, 0)), 0)
    iou_threshold = scalar(iou, boxes.dtype.type(0))
    score_floor = scalar(floor, None)
    box_corners = corners(boxes, bool(int(node.attr("center_point_box", 0))))
    rows = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            score = scores[b, c]
            order = np.lexsort((np.arange(score.size), -score))   # falling score, then lower index
            if score_floor is not None:
                order = order[score[order] > score_floor]
            kept: list[int] = []
            for i in order:
                if len(kept) >= most:
                    break
                if not suppresses(box_corners[b, kept], box_corners[b, i], iou_threshold):
                    kept.append(int(i))
            rows += [(b, c, i) for i in kept]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


@register("NonMaxSuppression")
class NonMaxSuppression(OpDef):
    value_inputs = (2,)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        boxes, scores = require(node, ins, 2, 5)
        if len(boxes.shape) != 3 or boxes.shape[2] != 4:
            raise fail(node, f"boxes {boxes.name!r} have shape {list(boxes.shape)}; NonMaxSuppression needs "
                             f"[batches, boxes, 4]")
        if len(scores.shape) != 3 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
            raise fail(node, f"scores {scores.name!r} have shape {list(scores.shape)}; with boxes "
                             f"{list(boxes.shape)} they need [{boxes.shape[0]}, classes, {boxes.shape[1]}]")
        if int(node.attr("center_point_box", 0)) not in (0, 1):
            raise fail(node, f"center_point_box={node.attr('center_point_box')} must be 0 or 1")
        forget_stand_in(node)
        values = [known_input(node, graph, i) for i in range(len(node.inputs))]
        known_boxes, known_scores = values[:2]
        if known_boxes is not None and known_scores is not None:
            return [out(node, nms(node, known_boxes, known_scores, *values[2:]).shape, DType.int64)]
        limit = scalar(values[2], boxes.shape[1]) if len(values) > 2 else 0
        most = scores.shape[0] * scores.shape[1] * min(max(int(limit), 0), boxes.shape[1])
        return [out(node, stand_in(node, (most, 3), "how many boxes survive suppression"), DType.int64)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [nms(node, np.asarray(args[0]), np.asarray(args[1]), *args[2:])]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        require_static(node)
        raise fail(node, "constant boxes and scores too large to fold at import: NonMaxSuppression is evaluated "
                         "(accelsim eval), not simulated")
