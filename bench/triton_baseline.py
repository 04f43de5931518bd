"""Triton baseline of the fused KV materialization (K norm + RoPE + KV write), written like the seed's
sglang kernel `_fused_norm_rope_kernel_stacked`, plus a torch eager reference.

The baseline is the seed's design on purpose, so that fkv-jit is compared against what serving
engines run today:
- one program per (token, KV head, layer), grid = (T, H, L);
- BLOCK_HD = next power of two of head_dim, with a mask;
- K and V rows loaded from proj [T, L, 2*KV] (rows may be strided);
- optional RMSNorm of K with a weight of head_dim, fp32 math;
- neox RoPE on the first rotary_dim dims, cos/sin from a [max_pos, R] cache at positions[t]
  (cos in the first R/2 columns, sin in the last R/2);
- stores to k_out / v_out [L, T, H, D] (stacked);
- the pool path is the stacked kernel followed by per-layer index-put copies
  `k_pool[l][cache_loc] = k_out[l]` (what the seed's write_layer_kv does).
Only neox is supported, like the seed.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _norm_rope_stacked_kernel(
    proj_ptr,
    k_norm_weight_ptr,  # [L, D] fp32
    eps_ptr,  # [L] fp32
    cos_sin_ptr,  # [max_pos, R]
    positions_ptr,  # [T]
    k_out_ptr,  # [L, T, H, D]
    v_out_ptr,
    proj_stride_token,
    proj_stride_layer,
    cos_sin_stride,
    num_tokens,
    KV: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    ROTARY_DIM: tl.constexpr,
    HALF_ROTARY: tl.constexpr,
    BLOCK_HD: tl.constexpr,
    HAS_KNORM: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    layer = tl.program_id(2)

    offs = tl.arange(0, BLOCK_HD)
    mask_hd = offs < HEAD_DIM
    mask_half = offs < HALF_ROTARY

    row = proj_ptr + token * proj_stride_token + layer * proj_stride_layer
    k_base = row + head * HEAD_DIM
    v_base = row + KV + head * HEAD_DIM
    out_offset = (layer * num_tokens + token) * KV + head * HEAD_DIM
    k_write = k_out_ptr + out_offset
    v_write = v_out_ptr + out_offset
    out_dtype = k_out_ptr.dtype.element_ty

    # V passes through unchanged.
    v_raw = tl.load(v_base + offs, mask=mask_hd, other=0.0)
    tl.store(v_write + offs, v_raw.to(v_out_ptr.dtype.element_ty), mask=mask_hd)

    # K: whole row (for the norm and the pass-through dims) and the second rotary half again,
    # offset by R/2, as the seed does.
    k_raw = tl.load(k_base + offs, mask=mask_hd, other=0.0).to(tl.float32)
    k_second = tl.load(k_base + HALF_ROTARY + offs, mask=mask_half, other=0.0).to(tl.float32)
    if HAS_KNORM:
        eps = tl.load(eps_ptr + layer).to(tl.float32)
        inv_rms = tl.rsqrt(tl.sum(k_raw * k_raw, axis=0) / HEAD_DIM + eps)
        w_row = k_norm_weight_ptr + layer * HEAD_DIM
        w = tl.load(w_row + offs, mask=mask_hd, other=0.0).to(tl.float32)
        w_second = tl.load(w_row + HALF_ROTARY + offs, mask=mask_half, other=0.0).to(tl.float32)
        k_normed = k_raw * inv_rms * w
        k_second = k_second * inv_rms * w_second
    else:
        k_normed = k_raw

    position = tl.load(positions_ptr + token).to(tl.int64)
    cs_row = cos_sin_ptr + position * cos_sin_stride
    cos = tl.load(cs_row + offs, mask=mask_half, other=1.0).to(tl.float32)
    sin = tl.load(cs_row + HALF_ROTARY + offs, mask=mask_half, other=0.0).to(tl.float32)

    k_first = tl.where(mask_half, k_normed, 0.0)
    rot_first = k_first * cos - k_second * sin
    rot_second = k_second * cos + k_first * sin
    tl.store(k_write + offs, rot_first.to(out_dtype), mask=mask_half)
    tl.store(k_write + HALF_ROTARY + offs, rot_second.to(out_dtype), mask=mask_half)
    mask_pass = (offs >= ROTARY_DIM) & mask_hd
    tl.store(k_write + offs, k_normed.to(out_dtype), mask=mask_pass)


def triton_stacked(proj, k_norm_weight, eps, cos_sin, positions, num_kv_heads, head_dim,
                   rotary_dim, k_out, v_out):
    """Launches the baseline kernel. proj [T, L, 2*H*D] (last dim contiguous), k_norm_weight
    [L, D] fp32 or None, eps [L] fp32, cos_sin [max_pos, R], positions [T] int64,
    k_out / v_out [L, T, H, D] contiguous."""
    num_tokens, num_layers, width = proj.shape
    kv = num_kv_heads * head_dim
    if width != 2 * kv or proj.stride(2) != 1:
        raise ValueError(f"proj must be [T, L, {2 * kv}] with a contiguous last dim, got "
                         f"{tuple(proj.shape)} strides {proj.stride()}")
    if rotary_dim <= 0 or rotary_dim % 2 or rotary_dim > head_dim:
        raise ValueError(f"the Triton baseline needs 0 < rotary_dim <= head_dim, even; got "
                         f"rotary_dim={rotary_dim}, head_dim={head_dim}")
    if not (k_out.is_contiguous() and v_out.is_contiguous()):
        raise ValueError("k_out and v_out must be contiguous [L, T, H, D]")
    if num_tokens == 0:
        return
    has_knorm = k_norm_weight is not None
    weight = k_norm_weight if has_knorm else eps  # dummy pointer, never read
    _norm_rope_stacked_kernel[(num_tokens, num_kv_heads, num_layers)](
        proj, weight, eps, cos_sin, positions, k_out, v_out,
        proj.stride(0), proj.stride(1), cos_sin.stride(0), num_tokens,
        KV=kv, HEAD_DIM=head_dim, ROTARY_DIM=rotary_dim, HALF_ROTARY=rotary_dim // 2,
        BLOCK_HD=triton.next_power_of_2(head_dim), HAS_KNORM=has_knorm,
    )


def triton_pool(proj, k_norm_weight, eps, cos_sin, positions, num_kv_heads, head_dim,
                rotary_dim, k_out, v_out, cache_loc, k_pool, v_pool):
    """The seed's pool path: stacked kernel into k_out / v_out, then per-layer index-put
    copies into each layer's cache buffer [slots, H, D] at rows cache_loc."""
    triton_stacked(proj, k_norm_weight, eps, cos_sin, positions, num_kv_heads, head_dim,
                   rotary_dim, k_out, v_out)
    for layer in range(len(k_pool)):
        k_pool[layer][cache_loc] = k_out[layer]
        v_pool[layer][cache_loc] = v_out[layer]


def reference(proj, k_norm_weight, eps, cos_sin, positions, num_kv_heads, head_dim,
              rotary_dim, out_dtype):
    """Torch eager reference of the same computation (neox), fp32 math; returns (k, v) [L, T, H, D]."""
    num_tokens, num_layers, _ = proj.shape
    kv = num_kv_heads * head_dim
    shape = (num_tokens, num_layers, num_kv_heads, head_dim)
    k = proj[:, :, :kv].float().reshape(shape)
    v = proj[:, :, kv:].reshape(shape)
    if k_norm_weight is not None:
        inv_rms = torch.rsqrt(k.pow(2).mean(dim=-1, keepdim=True)
                              + eps.float().view(1, num_layers, 1, 1))
        k = k * inv_rms * k_norm_weight.float().view(1, num_layers, 1, head_dim)
    half = rotary_dim // 2
    rows = cos_sin[positions.long()].float()  # [T, R]
    cos = rows[:, :half].view(num_tokens, 1, 1, half)
    sin = rows[:, half:rotary_dim].view(num_tokens, 1, 1, half)
    x1 = k[..., :half]
    x2 = k[..., half:rotary_dim]
    k = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, k[..., rotary_dim:]], dim=-1)
    k_out = k.to(out_dtype).permute(1, 0, 2, 3).contiguous()
    v_out = v.to(out_dtype).permute(1, 0, 2, 3).contiguous()
    return k_out, v_out


def compare(name, got, want, atol=2e-2, rtol=2e-2):
    """Returns (ok, max_abs_err, worst_excess) of |got - want| <= atol + rtol * |want|, fp32."""
    got = got.float()
    want = want.float()
    err = (got - want).abs()
    bound = atol + rtol * want.abs()
    excess = (err - bound).max().item() if err.numel() else 0.0
    max_err = err.max().item() if err.numel() else 0.0
    ok = bool(torch.isfinite(got).all().item()) and excess <= 0.0
    return ok, max_err, excess


# ---- a weight-read probe: the floor of a weight-streaming step ---------------------------------

@triton.jit
def _read_kernel(w_ptr, out_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    base = pid.to(tl.int64) * BLOCK * ITERS
    for i in range(ITERS):
        offs = base + i * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(w_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))


def read_probe(w, iters):
    """Reads every element of the contiguous tensor `w` once (BLOCK elements per step, `iters`
    steps per program) and returns per-program fp32 sums: the bytes of `w` and nothing else."""
    block = 4096
    n = w.numel()
    programs = triton.cdiv(n, block * iters)
    out = torch.empty(programs, dtype=torch.float32, device=w.device)
    _read_kernel[(programs,)](w, out, n, BLOCK=block, ITERS=iters)
    return out

