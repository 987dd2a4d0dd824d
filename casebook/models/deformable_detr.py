"""A compact Deformable-DETR-style detector, written once with switches for its export-hostile parts.

Transformer detectors such as Deformable DETR and DINO flatten several feature maps into one token
sequence and carry the maps' sizes along as ``spatial_shapes``. The reference implementation keeps
them in a tensor (``torch.as_tensor([(H, W), ...])``) and builds reference points with
``torch.linspace(0.5, H - 0.5, H)`` over them. Under ``torch.export`` a size read back out of a tensor
is data-dependent, which is the failure the case study reproduces. This module has the same
structure, small enough to run a 256x256 forward on CPU in a fraction of a second:

* backbone: a torchvision ResNet-18 trunk (``weights=None``: random weights, nothing is downloaded)
  returning three levels (strides 8, 16, 32), each projected to ``hidden_dim`` channels;
* encoder: multi-scale deformable self-attention in pure PyTorch (``grid_sample``), the same algorithm
  as the reference implementation's Python fallback ``ms_deform_attn_core_pytorch``;
* decoder: a few learned queries with self-attention and deformable cross-attention;
* heads and post-processing: sigmoid class scores, top-k over queries x classes, a score threshold,
  boxes scaled to the requested output size, returned as detectron2-style ``Instances``.

Three constructor switches select the forms the case study compares; every combination computes the
same thing in eager mode:

``shapes_as``
    ``"tensor"``: ``spatial_shapes`` is a ``(levels, 2)`` int64 tensor, as in the reference code.
    ``"list"``: a Python list of ``(H, W)`` tuples of ints (``SymInt``s under dynamic export).
``reference_points``
    ``"linspace"``: ``torch.linspace(0.5, H - 0.5, H)``, as in the reference code.
    ``"arange"``: ``torch.arange(H) + 0.5``, the same values with a size export can keep symbolic.
``attention``
    ``"pytorch"``: the attention's Python fallback, inline (``grid_sample`` per level).
    ``"custom_op"``: the operator ``casebook::ms_deform_attn``, with the published model's CUDA
    operator's signature (``spatial_shapes`` and ``level_start_index`` as tensors) and the fallback
    as its CPU kernel.

Inputs and outputs follow detectron2's convention: ``forward`` takes a list of dicts with an
``"image"`` tensor (3, H, W) and optional ``"height"``/``"width"`` ints (the size to report boxes in,
defaulting to the image size) and returns one ``{"instances": Instances}`` per image.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
import torchvision
from torch import nn

from casebook.models.stand_ins import Boxes, Instances

ShapesAs = Literal["tensor", "list"]
ReferencePoints = Literal["linspace", "arange"]
Attention = Literal["pytorch", "custom_op"]


# --- multi-scale deformable attention ---------------------------------------------------------


def ms_deform_attn_core_pytorch(
    value: torch.Tensor,
    spatial_shapes,
    sampling_locations: torch.Tensor,
    attention_weights: torch.Tensor,
) -> torch.Tensor:
    """Multi-scale deformable attention by bilinear sampling (the reference Python fallback).

    value: (N, S, M, D) tokens of all levels, flattened; spatial_shapes: the (H, W) of each level,
    as a tensor or a list; sampling_locations: (N, Lq, M, L, P, 2) in [0, 1]; attention_weights:
    (N, Lq, M, L, P). Returns (N, Lq, M * D).
    """
    n, _, m, d = value.shape
    _, lq, _, levels, points, _ = sampling_locations.shape
    value_list = value.split([h * w for h, w in spatial_shapes], dim=1)
    sampling_grids = 2 * sampling_locations - 1
    sampled = []
    for level, (h, w) in enumerate(spatial_shapes):
        # (N, H*W, M, D) -> (N*M, D, H, W)
        value_l = value_list[level].flatten(2).transpose(1, 2).reshape(n * m, d, h, w)
        # (N, Lq, M, P, 2) -> (N*M, Lq, P, 2)
        grid_l = sampling_grids[:, :, :, level].transpose(1, 2).flatten(0, 1)
        sampled.append(
            F.grid_sample(value_l, grid_l, mode="bilinear", padding_mode="zeros", align_corners=False)
        )
    weights = attention_weights.transpose(1, 2).reshape(n * m, 1, lq, levels * points)
    output = (torch.stack(sampled, dim=-2).flatten(-2) * weights).sum(-1).view(n, m * d, lq)
    return output.transpose(1, 2).contiguous()


@torch.library.custom_op("casebook::ms_deform_attn", mutates_args=())
def ms_deform_attn(
    value: torch.Tensor,
    spatial_shapes: torch.Tensor,
    level_start_index: torch.Tensor,
    sampling_locations: torch.Tensor,
    attention_weights: torch.Tensor,
    im2col_step: int,
) -> torch.Tensor:
    """Deformable attention as one operator, with the signature of the published model's CUDA
    ``MSDeformAttnFunction``. Its CPU kernel here is the Python fallback; export sees one opaque call
    either way, and reads ``spatial_shapes`` only in the kernel, where it has the values."""
    del level_start_index, im2col_step  # used by the CUDA kernel's memory layout, not by the fallback
    return ms_deform_attn_core_pytorch(value, spatial_shapes.tolist(), sampling_locations, attention_weights)


@ms_deform_attn.register_fake
def _ms_deform_attn_fake(
    value, spatial_shapes, level_start_index, sampling_locations, attention_weights, im2col_step
):
    n, _, heads, head_dim = value.shape
    return value.new_empty(n, sampling_locations.shape[1], heads * head_dim)


def spatial_shapes_tensor(spatial_shapes) -> tuple[torch.Tensor, torch.Tensor]:
    """``spatial_shapes`` and ``level_start_index`` as the published operator takes them: int64 tensors."""
    if not isinstance(spatial_shapes, torch.Tensor):
        # torch.tensor keeps SymInt sizes symbolic under export (torch.as_tensor of one would not).
        spatial_shapes = torch.tensor([[h, w] for h, w in spatial_shapes])
    spatial_shapes = spatial_shapes.to(torch.long)
    areas = spatial_shapes.prod(1)
    return spatial_shapes, torch.cat([areas.new_zeros(1), areas.cumsum(0)[:-1]])


class MSDeformAttn(nn.Module):
    """Multi-scale deformable attention: each query samples a few points around its reference point.

    ``attention`` picks the kernel: ``"pytorch"`` calls the Python fallback inline (export traces its
    ``grid_sample`` calls), ``"custom_op"`` calls the ``casebook::ms_deform_attn`` operator."""

    attention: Attention = "pytorch"

    def __init__(self, d_model: int, n_levels: int, n_heads: int, n_points: int):
        super().__init__()
        self.n_levels, self.n_heads, self.n_points = n_levels, n_heads, n_points
        self.sampling_offsets = nn.Linear(d_model, n_heads * n_levels * n_points * 2)
        self.attention_weights = nn.Linear(d_model, n_heads * n_levels * n_points)
        self.value_proj = nn.Linear(d_model, d_model)
        self.output_proj = nn.Linear(d_model, d_model)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        # As in the reference: offsets start on a ring of directions, one per head.
        nn.init.constant_(self.sampling_offsets.weight, 0.0)
        thetas = torch.arange(self.n_heads, dtype=torch.float32) * (2.0 * math.pi / self.n_heads)
        grid = torch.stack([thetas.cos(), thetas.sin()], -1)
        grid = (grid / grid.abs().max(-1, keepdim=True)[0]).view(self.n_heads, 1, 1, 2)
        grid = grid.repeat(1, self.n_levels, self.n_points, 1)
        for i in range(self.n_points):
            grid[:, :, i, :] *= i + 1
        with torch.no_grad():
            self.sampling_offsets.bias.copy_(grid.view(-1))

    def forward(self, query, reference_points, value_tokens, spatial_shapes, offset_normalizer):
        """query (N, Lq, C); reference_points (N, Lq, L, 2) in [0, 1]; value_tokens (N, S, C);
        offset_normalizer (L, 2): each level's (W, H), to turn pixel offsets into fractions."""
        n, lq, c = query.shape
        value = self.value_proj(value_tokens).view(n, value_tokens.shape[1], self.n_heads, c // self.n_heads)
        offsets = self.sampling_offsets(query).view(n, lq, self.n_heads, self.n_levels, self.n_points, 2)
        weights = self.attention_weights(query).view(n, lq, self.n_heads, self.n_levels * self.n_points)
        weights = weights.softmax(-1).view(n, lq, self.n_heads, self.n_levels, self.n_points)
        locations = (
            reference_points[:, :, None, :, None, :]
            + offsets / offset_normalizer[None, None, None, :, None, :]
        )
        if self.attention == "custom_op":
            shapes, level_start_index = spatial_shapes_tensor(spatial_shapes)
            output = ms_deform_attn(value, shapes, level_start_index, locations, weights, 64)
        else:
            output = ms_deform_attn_core_pytorch(value, spatial_shapes, locations, weights)
        return self.output_proj(output)


# --- the shape-dependent helpers the switches select ---------------------------------------------


def get_reference_points(spatial_shapes, device, method: ReferencePoints = "linspace") -> torch.Tensor:
    """The centre of every pixel of every level, normalised to [0, 1]: (1, sum(H*W), 2) as (x, y).

    ``method="linspace"`` is the reference implementation's ``torch.linspace(0.5, H - 0.5, H)``;
    ``"arange"`` computes the same values as ``torch.arange(H) + 0.5``.
    """
    points = []
    for h, w in spatial_shapes:
        if method == "linspace":
            ys = torch.linspace(0.5, h - 0.5, h, dtype=torch.float32, device=device)
            xs = torch.linspace(0.5, w - 0.5, w, dtype=torch.float32, device=device)
        elif method == "arange":
            ys = torch.arange(h, dtype=torch.float32, device=device) + 0.5
            xs = torch.arange(w, dtype=torch.float32, device=device) + 0.5
        else:
            raise ValueError(f"reference_points={method!r}: choose 'linspace' or 'arange'")
        ref_y, ref_x = torch.meshgrid(ys, xs, indexing="ij")
        points.append(torch.stack((ref_x.reshape(-1) / w, ref_y.reshape(-1) / h), -1))
    return torch.cat(points, 0)[None]


def make_spatial_shapes(features: list[torch.Tensor], shapes_as: ShapesAs):
    """The (H, W) of each feature level, as a (levels, 2) int64 tensor or a list of int tuples."""
    sizes = [tuple(f.shape[-2:]) for f in features]
    if shapes_as == "tensor":
        return torch.as_tensor(sizes, dtype=torch.long, device=features[0].device)
    if shapes_as == "list":
        return sizes
    raise ValueError(f"shapes_as={shapes_as!r}: choose 'tensor' or 'list'")


def offset_normalizer(spatial_shapes, like: torch.Tensor) -> torch.Tensor:
    """Each level's (W, H) as a float tensor (levels, 2), from either form of ``spatial_shapes``."""
    if isinstance(spatial_shapes, torch.Tensor):
        return torch.stack([spatial_shapes[..., 1], spatial_shapes[..., 0]], -1).to(like.dtype)
    # Not `torch.tensor([(w, h), ...])`: under dynamic export h and w are SymInts, and building a
    # tensor from them would specialize them to their example values. Arithmetic keeps them symbolic.
    x_unit, y_unit = like.new_tensor([1.0, 0.0]), like.new_tensor([0.0, 1.0])
    return torch.stack([x_unit * w + y_unit * h for h, w in spatial_shapes])


# --- building blocks ---------------------------------------------------------------------------


def sine_position_embedding(feature: torch.Tensor, num_pos_feats: int, temperature: float = 10000.0):
    """DETR's sine embedding of (y, x) pixel positions: (N, 2 * num_pos_feats, H, W).

    Positions come from a cumulative sum over a mask of ones, as in DETR, not from the sizes.
    """
    not_mask = torch.ones_like(feature[:, 0])
    y_embed = not_mask.cumsum(1) / (not_mask.cumsum(1)[:, -1:, :] + 1e-6) * 2 * math.pi
    x_embed = not_mask.cumsum(2) / (not_mask.cumsum(2)[:, :, -1:] + 1e-6) * 2 * math.pi
    dim_t = torch.arange(num_pos_feats, dtype=torch.float32, device=feature.device)
    dim_t = temperature ** (2 * torch.div(dim_t, 2, rounding_mode="floor") / num_pos_feats)
    pos_x = x_embed[..., None] / dim_t
    pos_y = y_embed[..., None] / dim_t
    pos_x = torch.stack((pos_x[..., 0::2].sin(), pos_x[..., 1::2].cos()), dim=4).flatten(3)
    pos_y = torch.stack((pos_y[..., 0::2].sin(), pos_y[..., 1::2].cos()), dim=4).flatten(3)
    return torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_levels: int, n_heads: int, n_points: int, ffn_dim: int):
        super().__init__()
        self.self_attn = MSDeformAttn(d_model, n_levels, n_heads, n_points)
        self.norm1 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, ffn_dim), nn.ReLU(), nn.Linear(ffn_dim, d_model))
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, src, pos, reference_points, spatial_shapes, normalizer):
        src = self.norm1(src + self.self_attn(src + pos, reference_points, src, spatial_shapes, normalizer))
        return self.norm2(src + self.ffn(src))


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, n_levels: int, n_heads: int, n_points: int, ffn_dim: int):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.norm1 = nn.LayerNorm(d_model)
        self.cross_attn = MSDeformAttn(d_model, n_levels, n_heads, n_points)
        self.norm2 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, ffn_dim), nn.ReLU(), nn.Linear(ffn_dim, d_model))
        self.norm3 = nn.LayerNorm(d_model)

    def forward(self, tgt, query_pos, reference_points, memory, spatial_shapes, normalizer):
        q = k = tgt + query_pos
        tgt = self.norm1(tgt + self.self_attn(q, k, tgt, need_weights=False)[0])
        tgt = self.norm2(
            tgt + self.cross_attn(tgt + query_pos, reference_points, memory, spatial_shapes, normalizer)
        )
        return self.norm3(tgt + self.ffn(tgt))


def box_cxcywh_to_xyxy(boxes: torch.Tensor) -> torch.Tensor:
    cx, cy, w, h = boxes.unbind(-1)
    return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], -1)


# --- the detector ----------------------------------------------------------------------------


class DeformableDETR(nn.Module):
    """A small Deformable DETR with random weights; see the module docstring for the switches.

    The class bias starts at the reference implementation's prior (probability 0.01), so with random
    weights every score sits a little above 0.01-0.05. The default ``score_threshold`` lies inside
    that band, so that some images keep a few detections and others none: both cases a detector's
    export has to handle.
    """

    def __init__(
        self,
        num_classes: int = 20,
        hidden_dim: int = 64,
        num_queries: int = 50,
        n_heads: int = 4,
        n_points: int = 4,
        enc_layers: int = 1,
        dec_layers: int = 2,
        ffn_dim: int = 128,
        top_k: int = 20,
        score_threshold: float = 0.0335,
        shapes_as: ShapesAs = "tensor",
        reference_points: ReferencePoints = "linspace",
        attention: Attention = "pytorch",
    ):
        super().__init__()
        self.shapes_as = shapes_as
        self.reference_points = reference_points
        self.attention = attention
        self.num_classes, self.top_k, self.score_threshold = num_classes, top_k, score_threshold
        trunk = torchvision.models.resnet18(weights=None)
        self.stem = nn.Sequential(trunk.conv1, trunk.bn1, trunk.relu, trunk.maxpool, trunk.layer1)
        self.stages = nn.ModuleList([trunk.layer2, trunk.layer3, trunk.layer4])  # strides 8, 16, 32
        n_levels = len(self.stages)
        self.input_proj = nn.ModuleList(
            nn.Sequential(nn.Conv2d(c, hidden_dim, 1), nn.GroupNorm(8, hidden_dim)) for c in (128, 256, 512)
        )
        self.level_embed = nn.Parameter(torch.randn(n_levels, hidden_dim) * 0.1)
        self.encoder = nn.ModuleList(
            EncoderLayer(hidden_dim, n_levels, n_heads, n_points, ffn_dim) for _ in range(enc_layers)
        )
        self.query_embed = nn.Embedding(num_queries, hidden_dim)  # positional part; content starts at zero
        self.query_ref = nn.Linear(hidden_dim, 2)
        self.decoder = nn.ModuleList(
            DecoderLayer(hidden_dim, n_levels, n_heads, n_points, ffn_dim) for _ in range(dec_layers)
        )
        self.class_embed = nn.Linear(hidden_dim, num_classes)
        nn.init.constant_(self.class_embed.bias, -math.log((1 - 0.01) / 0.01))  # prior probability 0.01
        self.bbox_embed = nn.Sequential(
            nn.Linear(hidden_dim, hidden_dim),
            nn.ReLU(),
            nn.Linear(hidden_dim, hidden_dim),
            nn.ReLU(),
            nn.Linear(hidden_dim, 4),
        )
        self.register_buffer(
            "pixel_mean", torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1), persistent=False
        )
        self.register_buffer("pixel_std", torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1), persistent=False)
        for module in self.modules():
            if isinstance(module, MSDeformAttn):
                module.attention = attention

    def forward(self, batched_inputs: list[dict]) -> list[dict[str, Instances]]:
        images = torch.stack([(x["image"] - self.pixel_mean) / self.pixel_std for x in batched_inputs])
        logits, boxes = self.predict(images)
        results = []
        for i, x in enumerate(batched_inputs):
            height = x.get("height", images.shape[-2])
            width = x.get("width", images.shape[-1])
            results.append({"instances": self.postprocess(logits[i], boxes[i], (height, width))})
        return results

    def features(self, images: torch.Tensor) -> list[torch.Tensor]:
        x = self.stem(images)
        levels = []
        for stage, proj in zip(self.stages, self.input_proj, strict=True):
            x = stage(x)
            levels.append(proj(x))
        return levels

    def predict(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Class logits (N, Q, classes) and normalised cxcywh boxes (N, Q, 4)."""
        features = self.features(images)
        spatial_shapes = make_spatial_shapes(features, self.shapes_as)
        src = torch.cat([f.flatten(2).transpose(1, 2) for f in features], 1)
        pos = torch.cat(
            [
                (
                    sine_position_embedding(f, f.shape[1] // 2).flatten(2).transpose(1, 2)
                    + self.level_embed[lvl]
                )
                for lvl, f in enumerate(features)
            ],
            1,
        )
        normalizer = offset_normalizer(spatial_shapes, src)
        n_levels = len(features)
        reference = get_reference_points(spatial_shapes, src.device, self.reference_points)
        reference = reference[:, :, None].expand(src.shape[0], -1, n_levels, -1)
        memory = src
        for layer in self.encoder:
            memory = layer(memory, pos, reference, spatial_shapes, normalizer)

        # As in DETR, the queries' content starts at zero and only their positions are learned, so
        # what they detect comes from the image (with random weights, learned content would dominate).
        query_pos = self.query_embed.weight[None].expand(src.shape[0], -1, -1)
        tgt = torch.zeros_like(query_pos)
        query_ref = self.query_ref(query_pos).sigmoid()
        for layer in self.decoder:
            tgt = layer(
                tgt,
                query_pos,
                query_ref[:, :, None].expand(-1, -1, n_levels, -1),
                memory,
                spatial_shapes,
                normalizer,
            )
        logits = self.class_embed(tgt)
        delta = self.bbox_embed(tgt)
        centre = (delta[..., :2] + torch.logit(query_ref, eps=1e-5)).sigmoid()
        return logits, torch.cat([centre, delta[..., 2:].sigmoid()], -1)

    def postprocess(
        self, logits: torch.Tensor, boxes: torch.Tensor, image_size: tuple[int, int]
    ) -> Instances:
        """Top-k (query, class) pairs, then a score threshold: a data-dependent number of detections."""
        height, width = image_size
        scores, index = logits.sigmoid().flatten().topk(self.top_k)
        classes = index % self.num_classes
        xyxy = box_cxcywh_to_xyxy(boxes[torch.div(index, self.num_classes, rounding_mode="floor")])
        x0, y0, x1, y1 = xyxy.unbind(-1)  # scaled one by one: height/width may be SymInts under export
        xyxy = torch.stack([x0 * width, y0 * height, x1 * width, y1 * height], -1)
        keep = scores > self.score_threshold
        result = Instances(image_size)
        result.pred_boxes = Boxes(xyxy[keep])
        result.scores = scores[keep]
        result.pred_classes = classes[keep]
        return result
