"""CPU tests of the installed fkv_jit wheel (pytest, or plain: python3 tests/test_python.py).

    scripts/test-wheel.sh     # builds the wheel, installs it into a fresh venv, runs these

Covers config loading, validation and its exact ValueError texts (the seed helper's), plans
(a tensor-parallel rank's too), cos/sin tables, precompilation into a temporary cache, NVRTC
loading (found, missing with a cache hit, missing with a miss), error classes and the names of
quantized weight formats (packed 4-bit schemes refused), and that a Config is the library's object,
read once, with plans (and their tensor-parallel head split) made by the library. The torch parts (argument checks of
FusedKVMaterializeHelper that need no GPU) are skipped when torch is missing.
"""

import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"

import fkv_jit  # noqa: E402  (the installed package, not the source tree)


def layer(kv=8, d=128, r=128, neox=True, theta=10000, k_norm=None):
    out = {"num_kv_heads": kv, "head_dim": d, "rotary_dim": r, "is_neox_style": neox,
           "rope_theta": theta}
    if k_norm:
        out["k_norm"] = k_norm
    return out


def two_layers(second):
    return {"fkv": {"layers": [layer(), second]}}


def raises(cls, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except cls as e:
        return e
    raise AssertionError(f"{fn.__name__} did not raise {cls.__name__}")


def test_load_and_validate():
    cfg = fkv_jit.load_config(DATA / "qwen3-8b.json")
    assert cfg.num_layers == 36
    assert cfg.hidden_size == 4096
    assert cfg.max_position_embeddings == 40960
    assert cfg.dtype == "bfloat16"
    assert cfg.architecture == "Qwen3ForCausalLM"
    l5 = cfg.layer(5)
    assert l5.index == 5 and l5.is_attention and l5.num_kv_heads == 8 and l5.k_norm == "rms"
    assert abs(l5.eps - 1e-6) < 1e-12
    spec = fkv_jit.validate(cfg)
    assert spec == fkv_jit.AttentionSpec(8, 128, 128, True, "rms", 1000000.0, "default"), spec
    # A path works as well as a Config.
    assert fkv_jit.validate(str(DATA / "qwen3-8b.json")) == spec
    gptj = fkv_jit.validate(DATA / "gptj-6b-neo-format.json")
    assert not gptj.is_neox_style and gptj.rotary_dim == 64 and gptj.head_dim == 256


def test_mismatch_texts():
    cases = [
        (layer(kv=4), "num_kv_heads mismatch across layers for fused KV path: expected 8, got 4 "
                      "at layer 1."),
        (layer(d=64, r=64), "head_dim mismatch across layers for fused KV path: expected 128, "
                            "got 64 at layer 1."),
        (layer(r=64, neox=False), "RoPE config mismatch across layers for fused KV path: expected "
                                  "(rotary_dim=128, neox=True), got (rotary_dim=64, neox=False) at "
                                  "layer 1."),
    ]
    for second, text in cases:
        e = raises(ValueError, fkv_jit.validate, two_layers(second))
        assert isinstance(e, fkv_jit.ConfigMismatchError)
        assert str(e) == text, f"{e!s}\n!=\n{text}"
        # Strict plans fail identically.
        e = raises(ValueError, fkv_jit.plan, two_layers(second))
        assert str(e) == text
    e = raises(ValueError, fkv_jit.validate, two_layers(layer(theta=500000)))
    assert str(e).startswith("RoPE frequency mismatch across layers for fused KV path: expected "
                             "(theta=10000.0"), str(e)
    assert str(e).endswith("at layer 1.")
    bad = {"fkv": {"layers": [layer(r=130)]}}
    e = raises(ValueError, fkv_jit.validate, bad)
    assert "rotary_dim" in str(e), str(e)


def test_bad_input():
    e = raises(ValueError, fkv_jit.load_config, "/nonexistent/config.json")
    assert isinstance(e, fkv_jit.BadInputError)
    assert "/nonexistent/config.json" in str(e)
    e = raises(fkv_jit.BadInputError, fkv_jit.config_from_json, '{"a": 1,\n "b": }', "bad.json")
    assert "bad.json" in str(e) and "line 2" in str(e), str(e)


def test_plan():
    p = fkv_jit.plan(DATA / "qwen3-8b.json")
    assert len(p.groups) == 1
    assert p.groups[0].layers == tuple(range(36))
    assert p.skipped == ()
    assert p.json["mode"] == "strict"
    assert p.groups[0].rope["theta"] == 1000000.0

    grouped = fkv_jit.plan(two_layers(layer(kv=4)), grouped=True)
    assert [g.layers for g in grouped.groups] == [(0,), (1,)]
    assert grouped.groups[1].spec.num_kv_heads == 4

    gemma = fkv_jit.load_config(DATA / "gemma3-4b-it.json")
    raises(fkv_jit.ConfigMismatchError, fkv_jit.plan, gemma)
    gp = fkv_jit.plan(gemma, grouped=True)
    assert len(gp.groups) == 2
    covered = sorted(sum((list(g.layers) for g in gp.groups), []) + list(gp.skipped))
    assert covered == list(range(gemma.num_layers))
    assert gp.groups[0].rope != gp.groups[1].rope

    desc = p.kernel_desc(0, act="bf16", cache="fp8_e4m3", pool=True)
    assert (desc.num_kv_heads, desc.head_dim, desc.rotary_dim) == (8, 128, 128)
    assert desc.neox and desc.k_norm == "rms" and desc.pool and desc.cache == "fp8_e4m3"
    e = raises(ValueError, p.kernel_desc, 0, act="bf16", cache="fp16")
    assert "cache dtype fp16" in str(e)
    e = raises(ValueError, p.kernel_desc, 3)
    assert str(e) == "group 3 is out of range: the plan has 1 group(s)"


def test_plan_tensor_parallel():
    # 8 KV heads over 2 ranks: 4 each, rank r holding heads [4r, 4r + 4).
    cfg = fkv_jit.load_config(DATA / "qwen3-8b.json")
    for rank in (0, 1):
        p = fkv_jit.plan(cfg, tp_size=2, tp_rank=rank)
        (g,) = p.groups
        assert g.spec.num_kv_heads == 4 and g.spec.head_dim == 128, g
        assert (g.first_kv_head, g.total_kv_heads, g.replicated) == (4 * rank, 8, False), g
        assert g.layers == tuple(range(36))
        assert (p.tp_size, p.tp_rank) == (2, rank)
        assert p.json["tp_size"] == 2 and p.json["tp_rank"] == rank
        assert p.json["groups"][0]["spec"]["num_kv_heads"] == 4
        assert p.kernel_desc(0, pool=True).num_kv_heads == 4
    # The old call forms still give the whole model.
    for whole in (fkv_jit.plan(cfg), fkv_jit.plan(cfg, False), fkv_jit.Plan(cfg, False)):
        g = whole.groups[0]
        assert (g.spec.num_kv_heads, g.first_kv_head, g.total_kv_heads) == (8, 0, 8)
        assert whole.kernel_desc(0).num_kv_heads == 8

    # Fewer KV heads than ranks: one head per rank, the same head on tp_size / H ranks.
    small = fkv_jit.load_config(DATA / "ernie4.5-0.3b.json")
    assert small.layer(0).num_kv_heads == 2
    firsts = []
    for rank in range(4):
        g = fkv_jit.plan(small, tp_size=4, tp_rank=rank).groups[0]
        assert g.spec.num_kv_heads == 1 and g.total_kv_heads == 2 and g.replicated, g
        firsts.append(g.first_kv_head)
    assert firsts == [0, 0, 1, 1], firsts

    # Grouped plans shard every group.
    gp = fkv_jit.plan(two_layers(layer(kv=4)), grouped=True, tp_size=2, tp_rank=1)
    assert [(g.spec.num_kv_heads, g.first_kv_head) for g in gp.groups] == [(4, 4), (2, 2)]

    # An uneven split is a clear error naming both numbers.
    e = raises(fkv_jit.ConfigMismatchError, fkv_jit.plan, cfg, tp_size=3, tp_rank=0)
    assert isinstance(e, ValueError)
    assert str(e).startswith("num_kv_heads=8 cannot be split across tp_size=3 ranks"), str(e)
    e = raises(fkv_jit.ConfigMismatchError, fkv_jit.plan, small, tp_size=3)
    assert "num_kv_heads=2" in str(e) and "tp_size=3" in str(e), str(e)
    # Bad ranks and sizes are argument errors.
    e = raises(fkv_jit.ArgumentError, fkv_jit.plan, cfg, tp_size=2, tp_rank=2)
    assert str(e) == "tp_rank 2 is outside [0, tp_size=2)", str(e)
    e = raises(fkv_jit.ArgumentError, fkv_jit.plan, cfg, tp_size=2, tp_rank=-1)
    assert "tp_rank -1" in str(e), str(e)
    e = raises(fkv_jit.ArgumentError, fkv_jit.plan, cfg, tp_size=0)
    assert str(e) == "tp_size must be >= 1, got 0", str(e)
    # A config mismatch is reported before any sharding.
    e = raises(fkv_jit.ConfigMismatchError, fkv_jit.plan, two_layers(layer(kv=4)), tp_size=3)
    assert str(e).startswith("num_kv_heads mismatch across layers"), str(e)


def test_cos_sin():
    p = fkv_jit.plan(DATA / "qwen3-8b.json")
    P, R = 8, 128
    raw = p.cos_sin_bytes(0, P, "fp32")
    assert len(raw) == P * R * 4
    vals = struct.unpack(f"<{P * R}f", raw)
    for pos in range(P):
        for i in (0, 1, 17, 63):
            f = 1000000.0 ** (-2.0 * i / R)
            assert abs(vals[pos * R + i] - math.cos(pos * f)) < 1e-6
            assert abs(vals[pos * R + R // 2 + i] - math.sin(pos * f)) < 1e-6
    bf16 = p.cos_sin_bytes(0, P, "bf16")
    assert len(bf16) == P * R * 2
    raises(ValueError, p.cos_sin_bytes, 0, P, "fp8_e4m3")


def test_precompile():
    cache = tempfile.mkdtemp(prefix="fkv-py-")
    try:
        n, compiled = fkv_jit.precompile(DATA / "qwen3-8b.json", arch="sm_90", cache_dir=cache)
        assert (n, compiled) == (2, 2), (n, compiled)
        cubins = list(Path(cache).rglob("*.cubin"))
        assert len(cubins) == 2, cubins
        assert fkv_jit.precompile(DATA / "qwen3-8b.json", "sm_90", cache_dir=cache) == (2, 0)
        e = raises(fkv_jit.CompileError, fkv_jit.precompile, DATA / "qwen3-8b.json", "sm_10",
                   cache_dir=cache)
        assert isinstance(e, RuntimeError) and "sm_90" in str(e)
        raises(fkv_jit.ArgumentError, fkv_jit.precompile, DATA / "qwen3-8b.json", "sm_90",
               dtype="int8", cache_dir=cache)
        # decode_gpu: the decode-size kernels a helper loads on that GPU (the draft's 8-token
        # bucket, stacked and pool, on the H200; its two epilogue kernels are qwen3-8b's, built
        # above); an unmeasured GPU is an ArgumentError.
        draft = DATA / "dflash-qwen3-4b-draft.json"
        assert fkv_jit.precompile(draft, "sm_90", cache_dir=cache, decode_gpu="H200") == (4, 2)
        assert len([c for c in Path(cache).rglob("fkvdec_*_tb8-*.cubin")]) == 2
        e = raises(fkv_jit.ArgumentError, fkv_jit.precompile, draft, "sm_90", cache_dir=cache,
                   decode_gpu="A100")
        assert "measured: H200" in str(e), str(e)
        # weights: the kernels of quantized K/V weights too (INT8: the decode kernels over the
        # stored bytes in every bucket, stacked and pool, the dequantize kernel and the INT8
        # GEMM's activation split and combine); a packed 4-bit scheme is refused by name.
        assert fkv_jit.precompile(draft, "sm_90", cache_dir=cache, decode_gpu="H200",
                                  weights="int8_channel") == (2 + 8 + 3, 8 + 3)
        # (file names keep the short name's first 64 characters: "..._pool_L5_x2560_tb8_int8_cha",
        # "..._stacked_L5_x2560_tb8_int8")
        assert len([c for c in Path(cache).rglob("fkvdec_*_int8*.cubin")]) == 8
        assert len([c for c in Path(cache).rglob("fkvdeq_int8_channel_*.cubin")]) == 1
        assert len([c for c in Path(cache).rglob("fkvsplit8_bf16_x2560*.cubin")]) == 1
        assert len([c for c in Path(cache).rglob("fkvcombine8_bf16*.cubin")]) == 1
        e = raises(fkv_jit.UnsupportedModelError, fkv_jit.precompile, draft, "sm_90",
                   cache_dir=cache, weights="awq")
        assert "awq" in str(e), str(e)
    finally:
        shutil.rmtree(cache)


def test_kernel_without_gpu():
    desc = fkv_jit.KernelDesc(8, 128, 127)
    e = raises(ValueError, fkv_jit.Kernel, desc)
    assert str(e) == "Invalid fused KV rotary/head dim pair: rotary_dim=127, head_dim=128."
    if not fkv_jit.driver_available():
        e = raises(fkv_jit.CudaError, fkv_jit.Kernel, fkv_jit.KernelDesc(8, 128, 128))
        assert str(e)


def test_helper_checks_without_gpu():
    try:
        import torch
    except ImportError:
        print("  (torch not installed: helper checks skipped)")
        return
    # Strict validation happens before any weight is touched.
    e = raises(ValueError, fkv_jit.FusedKVMaterializeHelper, two_layers(layer(kv=4)), [])
    assert str(e).startswith("num_kv_heads mismatch across layers")
    cfg = {"fkv": {"layers": [layer(kv=2, d=64, r=64)] * 2}}
    w = [torch.zeros(256, 32) for _ in range(2)]
    e = raises(ValueError, fkv_jit.FusedKVMaterializeHelper, cfg, w)
    assert "CUDA device" in str(e)
    e = raises(ValueError, fkv_jit.FusedKVMaterializeHelper, cfg, w[:1])
    assert "one entry per attention layer (2), got 1" in str(e)
    e = raises(TypeError, fkv_jit.FusedKVMaterializeHelper, cfg, [t.to(device="meta", dtype=torch.int16) for t in w])
    assert "bfloat16 or float16" in str(e)
    # int8 weights are quantized ones: they need a weight_format (and scales, act_dtype).
    e = raises(fkv_jit.ArgumentError, fkv_jit.FusedKVMaterializeHelper, cfg,
               [t.to(device="meta", dtype=torch.int8) for t in w])
    assert "pass weight_format (one of int8_channel)" in str(e), str(e)


def test_weight_format_names():
    # The library's names (include/fkv/weights.hpp) and the engines' spellings; no torch needed.
    for name, canonical in (("fp8_per_channel", "fp8_channel"), ("FP8-Block128", "fp8_block"),
                            ("w8a16", "int8_channel"), ("int8", "int8_channel"),
                            ("fp8", "fp8_tensor"), ("fp8_per_tensor", "fp8_tensor"),
                            ("dense", "dense"), ("fp8_block", "fp8_block")):
        assert fkv_jit.weight_format(name) == canonical, name
    # Packed 4-bit schemes are refused by name as unsupported (a ValueError), naming the scheme.
    for name in ("gptq", "awq", "nvfp4", "mxfp4", "int4", "w4a16", "marlin", "nf4"):
        e = raises(fkv_jit.UnsupportedModelError, fkv_jit.weight_format, name)
        assert f"weight format '{name}' packs 4-bit weights" in str(e), str(e)
        assert isinstance(e, ValueError)
    e = raises(fkv_jit.ArgumentError, fkv_jit.weight_format, "fp9")
    assert "unknown weight format 'fp9'" in str(e), str(e)
    raises(fkv_jit.ArgumentError, fkv_jit.weight_format, "fp8\0_channel")
    raises(TypeError, fkv_jit.weight_format, 8)


def test_declared_weight_format():
    # quantization_config (docs/config-rules.md): the K/V weight format a checkpoint declares, the
    # default of precompile's weights=; a declaration fkv-jit does not read raises where used.
    base = json.loads((DATA / "dflash-qwen3-4b-draft.json").read_text())
    plain = fkv_jit.config_from_json(base)
    assert plain.weight_format is None and plain.weight_format_source == ""
    base["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3",
                                   "quant_method": "fp8", "weight_block_size": [128, 128]}
    block = fkv_jit.config_from_json(base, "draft.json")
    assert block.weight_format == "fp8_block"
    assert block.weight_format_source == (
        'quantization_config.weight_block_size = [128, 128] (quant_method "fp8")')
    base["quantization_config"] = {"bits": 4, "group_size": 128, "quant_method": "gptq"}
    gptq = fkv_jit.config_from_json(base, "draft.json")
    e = raises(fkv_jit.UnsupportedModelError, lambda: gptq.weight_format)
    assert str(e).startswith("draft.json: key 'quantization_config.quant_method': \"gptq\""), e
    assert gptq.weight_format_source == ""
    base["quantization_config"] = "fp8"
    raises(fkv_jit.BadInputError, lambda: fkv_jit.config_from_json(base).weight_format)
    cache = tempfile.mkdtemp(prefix="fkv-py-")
    try:
        # The declared fp8_block adds the dequantize kernel and the activation quantizer.
        assert fkv_jit.precompile(block, "sm_90", cache_dir=cache) == (4, 4)
        assert len(list(Path(cache).rglob("fkvdeq_fp8_block_*.cubin"))) == 1
        raises(fkv_jit.UnsupportedModelError, fkv_jit.precompile, gptq, "sm_90", cache_dir=cache)
        assert fkv_jit.precompile(gptq, "sm_90", cache_dir=cache, weights="dense") == (2, 0)
    finally:
        shutil.rmtree(cache)


def test_installed_not_source_tree():
    # The tests run against the wheel: the package and its binding come from site-packages.
    assert "site-packages" in fkv_jit.__file__, fkv_jit.__file__
    assert os.path.exists(fkv_jit.library_path())


def _run_with_nvrtc(nvrtc_file, code):
    """Runs `code` in a fresh interpreter whose NVRTC is `nvrtc_file` (FKV_NVRTC_LIBRARY)."""
    env = dict(os.environ, FKV_NVRTC_LIBRARY=nvrtc_file)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=600)


def test_nvrtc_found():
    ok, path = fkv_jit.nvrtc_status()
    assert ok and "libnvrtc.so" in path, path


def test_nvrtc_missing():
    """Without NVRTC, a cache hit still works and a miss is a CompileError saying what to
    install. The cache is filled with the system toolkit's NVRTC, the version the wheel was
    built with, whose entries a machine without NVRTC looks up."""
    system = "/usr/local/cuda/lib64/libnvrtc.so.13"
    cache = tempfile.mkdtemp(prefix="fkv-py-nvrtc-")
    code = ("import fkv_jit\n"
            f"print(fkv_jit.precompile({str(DATA / 'qwen3-8b.json')!r}, 'sm_90', cache_dir={cache!r}))")
    try:
        missing = _run_with_nvrtc("/nonexistent/libnvrtc.so.13", code)
        assert missing.returncode != 0
        assert "CompileError" in missing.stderr and "pip install nvidia-cuda-nvrtc" in missing.stderr, missing.stderr
        if not os.path.exists(system):
            print("  (no system CUDA Toolkit NVRTC: the cache-hit half is skipped)")
            return
        filled = _run_with_nvrtc(system, code)
        assert filled.returncode == 0 and "(2, 2)" in filled.stdout, filled.stderr
        hit = _run_with_nvrtc("/nonexistent/libnvrtc.so.13", code)
        assert hit.returncode == 0 and "(2, 0)" in hit.stdout, hit.stderr
    finally:
        shutil.rmtree(cache)


# ---- issue 23: the C boundary and Python arguments -------------------------------------------

def test_cos_sin_range():
    """max_position 2**57 used to overflow the table size to 0 bytes (the interpreter then died
    filling it); -5 meant "the config's value". Both are ArgumentErrors now."""
    p = fkv_jit.plan(DATA / "qwen3-8b.json")
    e = raises(fkv_jit.ArgumentError, p.cos_sin_bytes, 0, 2 ** 57)
    assert "max_position is 144115188075855872" in str(e) and "2^31" in str(e), str(e)
    e = raises(fkv_jit.ArgumentError, p.cos_sin_bytes, 0, -5)
    assert "max_position is -5" in str(e), str(e)


def test_malformed_env_is_bad_input():
    """FKV_BLOCK_WARPS=abc is bad input (BadInputError naming the variable), not a config
    mismatch. Variables are read once per process: a fresh interpreter."""
    cache = tempfile.mkdtemp(prefix="fkv-py-env-")
    code = ("import fkv_jit\n"
            "try:\n"
            f"    fkv_jit.precompile({str(DATA / 'qwen3-8b.json')!r}, 'sm_90', cache_dir={cache!r})\n"
            "except fkv_jit.BadInputError as e:\n"
            "    assert not isinstance(e, fkv_jit.ConfigMismatchError)\n"
            "    print('BadInputError:', e)\n")
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=600, env=dict(os.environ, FKV_BLOCK_WARPS="abc"))
        assert r.returncode == 0, r.stderr
        assert "BadInputError:" in r.stdout and "FKV_BLOCK_WARPS" in r.stdout, r.stdout
    finally:
        shutil.rmtree(cache)


def test_nul_in_config_string_kept_in_error():
    """A NUL inside a config string shows as \\x00 in the message, which keeps the text after it."""
    text = '{"model_type": "qwen3\\u0000after-the-nul", "num_hidden_layers": 2}'
    e = raises(fkv_jit.FkvError, fkv_jit.config_from_json, text, "nul.json")
    assert "qwen3\\x00after-the-nul" in str(e), str(e)


def test_paths_str_bytes_pathlike():
    """Paths may be str, bytes or os.PathLike (precompile(cache_dir=b"/x") used to write to
    ./b'/x'/)."""
    path = DATA / "qwen3-8b.json"
    spec = fkv_jit.validate(str(path))
    assert fkv_jit.validate(path) == spec
    assert fkv_jit.validate(os.fsencode(str(path))) == spec
    assert fkv_jit.load_config(os.fsencode(str(path))).num_layers == 36
    cache = tempfile.mkdtemp(prefix="fkv-py-bytes-")
    cwd = os.getcwd()
    try:
        os.chdir(cache)  # a cache written to ./b'...' would land here
        fkv_jit.precompile(path, "sm_90", cache_dir=os.fsencode(os.path.join(cache, "c")))
        assert sorted(os.listdir(cache)) == ["c"], os.listdir(cache)
        assert list(Path(cache, "c").rglob("*.cubin"))
    finally:
        os.chdir(cwd)
        shutil.rmtree(cache)
    raises(TypeError, fkv_jit.load_config, 42)


def test_nul_in_strings_refused():
    """A str with a NUL used to be cut at the NUL: validate(path + "\\0junk") validated path."""
    path = str(DATA / "qwen3-8b.json")
    e = raises(fkv_jit.ArgumentError, fkv_jit.validate, path + "\0junk")
    assert "NUL" in str(e), str(e)
    raises(fkv_jit.ArgumentError, fkv_jit.load_config, path + "\0")
    raises(fkv_jit.ArgumentError, fkv_jit.config_from_json, two_layers(layer()), "name\0x")
    raises(fkv_jit.ArgumentError, fkv_jit.config_from_json, '{"fkv": {"layers": []}}\0 junk')
    raises(fkv_jit.ArgumentError, fkv_jit.precompile, path, "sm_90\0")
    raises(fkv_jit.ArgumentError, fkv_jit.precompile, path, "sm_90", dtype="bf16\0x")
    raises(fkv_jit.ArgumentError, fkv_jit.precompile, path, "sm_90", cache_dir="/tmp/x\0y")
    p = fkv_jit.plan(path)
    raises(fkv_jit.ArgumentError, p.cos_sin_bytes, 0, 4, "fp32\0")
    raises(fkv_jit.ArgumentError, p.kernel_desc, 0, "bf16\0")


def test_integers_past_32_bits_refused():
    """plan(tp_size=2**32 + 8, tp_rank=2**32 + 1) used to return the TP-8 rank-1 plan."""
    path = DATA / "qwen3-8b.json"
    e = raises(fkv_jit.ArgumentError, fkv_jit.plan, path, tp_size=2 ** 32 + 8, tp_rank=2 ** 32 + 1)
    assert "tp_size is 4294967304" in str(e), str(e)
    raises(fkv_jit.ArgumentError, fkv_jit.plan, path, tp_size=8, tp_rank=2 ** 32 + 1)
    raises(fkv_jit.ArgumentError, fkv_jit.plan, path, tp_size=-(2 ** 32) + 8)
    p = fkv_jit.plan(path)
    raises(fkv_jit.ArgumentError, p.kernel_desc, 2 ** 32)  # group 2**32 is not group 0
    raises(fkv_jit.ArgumentError, p.cos_sin_bytes, 2 ** 32, 4)
    raises(fkv_jit.ArgumentError, fkv_jit.Kernel, fkv_jit.KernelDesc(8, 128, 128), 2 ** 32)
    raises(fkv_jit.ArgumentError, fkv_jit.Kernel, fkv_jit.KernelDesc(2 ** 32 + 8, 128, 128))


def test_argument_types_refused_not_coerced():
    """The eleventh session's probe: plan(tp_size=2.7) was the TP-2 plan, tp_size="2" and
    cos_sin_bytes(0, "16") were parsed, act=None became the dtype 'None', Kernel(None) an
    AttributeError, JSON text given as a path an error quoting it as a file name."""
    path = DATA / "qwen3-8b.json"
    for bad in (2.7, "2", None):
        e = raises(fkv_jit.ArgumentError, fkv_jit.plan, path, tp_size=bad)
        assert "tp_size must be an integer" in str(e), str(e)
    raises(fkv_jit.ArgumentError, fkv_jit.plan, path, tp_size=2, tp_rank=1.0)
    assert fkv_jit.plan(path, tp_size=True).tp_size == 1  # operator.index: bool is an int
    p = fkv_jit.plan(path)
    e = raises(fkv_jit.ArgumentError, p.cos_sin_bytes, 0, "16")
    assert "max_position must be an integer" in str(e), str(e)
    raises(fkv_jit.ArgumentError, p.cos_sin_bytes, 0.0, 16)
    e = raises(fkv_jit.ArgumentError, p.kernel_desc, 0, act=None)
    assert "act must be a str" in str(e), str(e)
    raises(fkv_jit.ArgumentError, fkv_jit.precompile, path, "sm_90", dtype=b"bf16")
    raises(fkv_jit.ArgumentError, fkv_jit.precompile, path, 90)
    e = raises(fkv_jit.ArgumentError, fkv_jit.Kernel, None)
    assert "KernelDesc" in str(e), str(e)
    text = json.dumps(two_layers(layer()))
    e = raises(fkv_jit.BadInputError, fkv_jit.validate, text)
    assert "config_from_json" in str(e), str(e)
    assert fkv_jit.validate(json.loads(text)).num_kv_heads == 8  # the dict is read


def test_non_utf8_path_is_an_argument_error():
    """A path whose bytes are not UTF-8 raised a bare UnicodeEncodeError from the binding."""
    tmp = tempfile.mkdtemp(prefix="fkv-py-latin1-")
    try:
        name = os.path.join(os.fsencode(tmp), b"q\xff.json")
        with open(name, "wb") as f:
            f.write((DATA / "qwen3-8b.json").read_bytes())
        e = raises(fkv_jit.ArgumentError, fkv_jit.validate, name)
        assert "not valid UTF-8" in str(e) and "CLI" in str(e), str(e)
        raises(fkv_jit.ArgumentError, fkv_jit.precompile, DATA / "qwen3-8b.json", "sm_90",
               cache_dir=os.path.join(os.fsencode(tmp), b"c\xff"))
    finally:
        shutil.rmtree(tmp)


def test_helper_without_torch_says_what_it_needs():
    try:
        import torch  # noqa: F401
        print("skip: torch is installed")
        return
    except ImportError:
        pass
    e = raises(ModuleNotFoundError, getattr, fkv_jit, "FusedKVMaterializeHelper")
    assert "needs torch" in str(e) and e.name == "torch", str(e)
    raises(ModuleNotFoundError, getattr, fkv_jit, "sglang")


# ---- issue 25: Python over native objects ---------------------------------------------------

def test_config_read_once():
    """A Config holds the library's config object, read once by load_config: a file changed, then
    removed afterwards changes nothing, and every later call (validate, plan, kernel
    descriptions, cos/sin tables, precompile) works from the object."""
    tmp = tempfile.mkdtemp(prefix="fkv-py-once-")
    path = os.path.join(tmp, "config.json")
    shutil.copy(DATA / "qwen3-8b.json", path)
    try:
        cfg = fkv_jit.load_config(path)
        whole = fkv_jit.plan(cfg)
        # A mismatched config in its place: read again, it would fail strict validation.
        with open(path, "w") as f:
            json.dump(two_layers(layer(kv=4)), f)
        raises(fkv_jit.ConfigMismatchError, fkv_jit.validate, path)
        assert fkv_jit.validate(cfg) == fkv_jit.AttentionSpec(8, 128, 128, True, "rms", 1000000.0,
                                                              "default")
        os.remove(path)
        raises(fkv_jit.BadInputError, fkv_jit.load_config, path)
        assert cfg.num_layers == 36 and cfg.layer(35).num_kv_heads == 8
        p = fkv_jit.plan(cfg, tp_size=2, tp_rank=1)
        assert p.groups[0].layers == tuple(range(36)) and p.groups[0].first_kv_head == 4
        assert p.kernel_desc(0, pool=True).num_kv_heads == 4
        assert whole.kernel_desc(0).num_kv_heads == 8
        # Read from the config object: 40960 rows of 128 fp32 values, the RoPE of theta 1e6.
        assert len(whole.cos_sin_bytes(0)) == 40960 * 128 * 4
        assert p.cos_sin_bytes(0, 4) == whole.cos_sin_bytes(0, 4)  # every rank: one table
        cache = os.path.join(tmp, "cache")
        assert fkv_jit.precompile(cfg, "sm_90", cache_dir=cache) == (2, 2)
    finally:
        shutil.rmtree(tmp)


def test_config_from_json_read_once():
    """A dict or JSON text is read once too: the Config does not keep the text."""
    doc = two_layers(layer())
    cfg = fkv_jit.config_from_json(doc, "mine.json")
    doc["fkv"]["layers"][1]["num_kv_heads"] = 4  # the caller's dict changes afterwards
    assert fkv_jit.validate(cfg).num_kv_heads == 8
    assert fkv_jit.plan(cfg, grouped=True).groups[0].layers == (0, 1)
    assert repr(cfg) == "fkv_jit.Config('mine.json', layers=2)"


def test_plan_split_is_the_librarys():
    """The tensor-parallel head split of a Plan is the library's own (fkv::shard_plan of the
    rank): each rank's groups equal what the fkv-jit CLI prints for `plan --tp`, for an even
    split, a replicated one and a grouped plan, and the kernel descriptions follow it."""
    cli = Path(fkv_jit.__file__).parent / "bin" / "fkv-jit"
    cases = [("qwen3-8b.json", 4), ("ernie4.5-0.3b.json", 4), ("gemma3-4b-it.json", 2)]
    for name, tp in cases:
        r = subprocess.run([str(cli), "plan", str(DATA / name), "--tp", str(tp), "--json"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        ranks = json.loads(r.stdout)["ranks"]
        assert len(ranks) == tp
        for rank in ranks:
            p = fkv_jit.plan(DATA / name, grouped=True, tp_size=tp, tp_rank=rank["rank"])
            mine = [{"first_head": g.first_kv_head, "num_heads": g.spec.num_kv_heads,
                     "total_heads": g.total_kv_heads, "replicated": g.replicated}
                    for g in p.groups]
            assert mine == rank["groups"], (name, rank, mine)
            assert [g["heads"] for g in p.json["groups"]] == rank["groups"]
            for i, g in enumerate(p.groups):
                assert p.kernel_desc(i).num_kv_heads == g.spec.num_kv_heads
                assert p.json["groups"][i]["spec"]["num_kv_heads"] == g.spec.num_kv_heads


def test_error_kinds_agree():
    """One error taxonomy behind every front-end (issue 25): each bad input of
    tests/error_kinds.json raises the Python class the library's kind table gives its kind, and
    the wheel's fkv-jit exits with that kind's code and names it in --json. test_error_kinds.cpp
    holds the C API and the CLI of the C++ build to the same kinds."""
    from fkv_jit import _lib

    table = {k["name"]: k for k in json.loads(_lib.native().error_kinds())}
    cases = json.loads((ROOT / "tests" / "error_kinds.json").read_text())["cases"]
    cli = Path(fkv_jit.__file__).parent / "bin" / "fkv-jit"
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases:
            want = table[c["kind"]]
            if "data" in c:
                path = DATA / c["data"]
            elif "missing" in c:
                path = Path(tmp) / c["missing"]
            else:
                path = Path(tmp) / "input.json"
                path.write_text(c["text"])
            try:
                fkv_jit.validate(path)
                raise AssertionError(f"{c['name']}: validate() raised nothing")
            except fkv_jit.FkvError as e:
                assert type(e).__name__ == want["python_class"], (c["name"], type(e), str(e))
            r = subprocess.run([str(cli), "validate", "--json", str(path)], capture_output=True,
                               text=True, timeout=120)
            assert r.returncode == want["exit_code"], (c["name"], r.returncode, r.stderr)
            out = json.loads(r.stdout)
            assert out["valid"] is False and out["error_kind"] == c["kind"], (c["name"], out)


def main():
    print(f"fkv_jit {fkv_jit.version()} from {fkv_jit.library_path()}")
    from plain_runner import run  # tests/plain_runner.py, beside this file

    return run(globals())


if __name__ == "__main__":
    sys.exit(main())
