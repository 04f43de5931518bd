"""Embedding fkv-jit in a Python serving engine (torch), the way a DFlash/EAGLE draft worker
would: validate the draft config, precompile its kernels, build the helper from the draft's
weights, and materialize K/V straight into the KV pool, checked against plain PyTorch.

    pip install dist/fkv_jit-*.whl     # scripts/test-wheel.sh builds it
    python3 examples/python_example.py tests/data/dflash-qwen3-4b-draft.json

Without torch or a GPU it stops after validation and precompilation.
"""

import os
import sys
import tempfile
from pathlib import Path

import fkv_jit


def main(config_path: str) -> int:
    # 1. Validate: the seed's strict semantics; a mismatch is a ValueError with its exact text.
    try:
        spec = fkv_jit.validate(config_path)
    except ValueError as e:
        print(f"config cannot use the fused KV path: {e}")
        return 1
    print(f"fused KV spec: {spec}")

    # 2. Precompile (no GPU needed; typically while building the container image).
    cache_dir = os.environ.get("FKV_CACHE_DIR") or tempfile.mkdtemp(prefix="fkv-example-")
    arch = os.environ.get("FKV_ARCH", "sm_90")
    n, compiled = fkv_jit.precompile(config_path, arch=arch, cache_dir=cache_dir)
    print(f"precompiled {n} kernels for {arch} ({compiled} compiled now) into {cache_dir}")

    try:
        import torch
    except ImportError:
        print("torch not installed: stopping here")
        return 0
    if not torch.cuda.is_available():
        print("no GPU: stopping here")
        return 0

    # 3. The draft's weights, as an engine holds them (random here): per layer the K/V rows of
    #    the QKV projection weight and the K-norm weight.
    cfg = fkv_jit.load_config(config_path)
    layers = cfg.attention_layers
    H, D, R = spec.num_kv_heads, spec.head_dim, spec.rotary_dim
    hidden, dev, dt = cfg.hidden_size, torch.device("cuda"), torch.bfloat16
    torch.manual_seed(0)
    w_kv = [torch.randn(2 * H * D, hidden, device=dev, dtype=dt) * hidden ** -0.5 for _ in layers]
    k_norm = [1 + 0.1 * torch.randn(D, device=dev) for _ in layers]
    # Everything that allocates or compiles happens here: weights packed, cos/sin tables built
    # (max_position rows: context length + block size), kernels loaded. Calls only launch, so
    # they can be captured in a CUDA graph.
    helper = fkv_jit.FusedKVMaterializeHelper(config_path, w_kv,
                                              k_norm if spec.k_norm != "none" else None,
                                              max_position=4096)

    # 4. One step: T context tokens into a KV pool of num_slots rows per layer.
    T, num_slots = 64, 1024
    ctx_hidden = torch.randn(T, hidden, device=dev, dtype=dt)
    positions = torch.randint(0, 4096, (T,), device=dev)
    cache_loc = torch.randperm(num_slots, device=dev)[:T]
    k_pool = [torch.zeros(num_slots, H, D, device=dev, dtype=dt) for _ in layers]
    v_pool = [torch.zeros_like(b) for b in k_pool]
    helper.materialize_to_pool(ctx_hidden, positions, cache_loc, k_pool, v_pool)

    # The seed-shaped call works too: write_layer_kv(layer_id, k [T, H, D], v [T, H, D]).
    stacked = {}
    helper.materialize(ctx_hidden, positions, lambda i, k, v: stacked.__setitem__(i, k))
    torch.cuda.synchronize()

    # 5. Check layer 0 against plain PyTorch: linear -> RMSNorm -> neox RoPE.
    table = helper.plan.cos_sin_tensor(0, 4096, device=dev)
    proj = torch.nn.functional.linear(ctx_hidden, w_kv[0]).float()
    k = proj[:, : H * D].reshape(T, H, D)
    if spec.k_norm != "none":
        k = k * torch.rsqrt(k.pow(2).mean(-1, keepdim=True) + layers[0].eps) * k_norm[0]
    if R:
        cos, sin = table[positions, : R // 2][:, None], table[positions, R // 2:][:, None]
        if spec.is_neox_style:
            x1, x2 = k[..., : R // 2], k[..., R // 2: R]
            rot = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
        else:
            x1, x2 = k[..., 0:R:2], k[..., 1:R:2]
            rot = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).flatten(-2)
        k = torch.cat([rot, k[..., R:]], -1)
    err_pool = (k_pool[0][cache_loc].float() - k).abs().max().item()
    err_stacked = (stacked[layers[0].index].float() - k).abs().max().item()
    print(f"layer 0: max |k - reference| = {err_pool:.4f} (pool), {err_stacked:.4f} (stacked)")
    ok = err_pool < 0.1 and err_stacked < 0.1
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  str(Path(__file__).resolve().parent.parent / "tests/data/dflash-qwen3-4b-draft.json")))
