#!/usr/bin/env python3
"""Reference values for tests/test_rope.cpp, computed independently of src/rope.cpp.

Pure Python (`math` only, float64), written from the published formulas in HuggingFace
transformers, src/transformers/modeling_rope_utils.py (_compute_default_rope_parameters,
_compute_linear_scaling_rope_parameters, _compute_dynamic_ntk_parameters,
_compute_llama3_parameters, _compute_yarn_parameters, _compute_longrope_parameters, and
standardize_rope_params for the original_max_position_embeddings fallback), evaluated in
float64 instead of torch float32. Real-model cases read their parameters from the configs in
tests/data/ with the HF key rules, so a config -> RopeTable test can compare against them.

    python3 tests/data/rope/gen_rope_refs.py   # rewrites tests/data/rope/rope_refs.json
"""
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)


def default_inv_freq(base, dim):
    return [1.0 / (base ** ((2 * i) / dim)) for i in range(dim // 2)]


def rope_params(kind, theta, sc, dim, mpe, seq_len):
    """-> (inv_freq list, attention_factor) for rope type `kind` with scaling dict `sc`."""
    if kind in ("default", "mrope"):
        return default_inv_freq(theta, dim), 1.0
    if kind == "linear":
        return [f / sc["factor"] for f in default_inv_freq(theta, dim)], 1.0
    if kind == "dynamic":
        factor = sc["factor"]
        s = max(seq_len, mpe)
        base = theta * ((factor * s / mpe) - (factor - 1)) ** (dim / (dim - 2))
        return default_inv_freq(base, dim), 1.0
    orig = sc.get("original_max_position_embeddings", mpe)
    if kind == "llama3":
        factor, lo, hi = sc["factor"], sc["low_freq_factor"], sc["high_freq_factor"]
        low_wl, high_wl = orig / lo, orig / hi
        out = []
        for f in default_inv_freq(theta, dim):
            wl = 2 * math.pi / f
            if wl < high_wl:
                out.append(f)
            elif wl > low_wl:
                out.append(f / factor)
            else:
                s = (orig / wl - lo) / (hi - lo)
                out.append((1 - s) * f / factor + s * f)
        return out, 1.0
    if kind == "yarn":
        factor = sc.get("factor")
        if factor is None:
            factor = mpe / orig

        def get_mscale(scale, m=1):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        att = sc.get("attention_factor")
        if att is None:
            ms, msa = sc.get("mscale"), sc.get("mscale_all_dim")
            att = get_mscale(factor, ms) / get_mscale(factor, msa) if (ms and msa) else get_mscale(factor)
        beta_fast = sc.get("beta_fast") or 32
        beta_slow = sc.get("beta_slow") or 1

        def corr_dim(rot):
            return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(theta))

        low, high = corr_dim(beta_fast), corr_dim(beta_slow)
        if sc.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        out = []
        for i in range(dim // 2):
            pf = theta ** ((2 * i) / dim)
            extra, inter = 1.0 / pf, 1.0 / (factor * pf)
            ramp = min(max((i - low) / (high - low), 0.0), 1.0)
            ef = 1 - ramp
            out.append(inter * (1 - ef) + extra * ef)
        return out, float(att)
    if kind == "longrope":
        factor = sc.get("factor")
        if factor is None:
            factor = mpe / orig
        att = sc.get("attention_factor")
        if att is None:
            att = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
        ext = sc["long_factor"] if seq_len > orig else sc["short_factor"]
        return [1.0 / (ext[i] * theta ** ((2 * i) / dim)) for i in range(dim // 2)], float(att)
    raise ValueError(kind)


SAMPLE_POSITIONS = [0, 1, 2, 3, 17, 100, 1000, 2047, 4095, 4096, 8191, 32768, 65535, 131071]


def make_case(name, theta, kind, scaling, dim, max_position, mpe, seq_len=0, config=None, layer=None):
    sl = seq_len if seq_len > 0 else max_position
    inv, att = rope_params(kind, theta, scaling, dim, mpe, sl)
    half = dim // 2
    cols = sorted(set([0, 1, half // 4, half // 2, half - 2, half - 1]))
    samples = []
    for p in SAMPLE_POSITIONS:
        if p >= max_position:
            continue
        for i in cols:
            a = p * inv[i]
            samples.append([p, i, math.cos(a) * att, math.sin(a) * att])
    case = {
        "name": name,
        "rope": {"theta": theta, "type": kind, "scaling": scaling},
        "rotary_dim": dim,
        "max_position": max_position,
        "max_position_embeddings": mpe,
        "seq_len": seq_len,
        "inv_freq": inv,
        "attention_factor": att,
        "samples": samples,
    }
    if config:
        case["config"] = config
        case["layer"] = layer
    return case


def hf_scaling(d):
    """rope_scaling / rope_parameters minus the keys that name the type or theta."""
    sc = d.get("rope_scaling") or d.get("rope_parameters") or {}
    kind = sc.get("rope_type", sc.get("type", "default"))
    rest = {k: v for k, v in sc.items() if k not in ("rope_type", "type", "rope_theta", "partial_rotary_factor")}
    return kind, rest


def config_cases():
    cases = []

    def load(f):
        with open(os.path.join(DATA, f)) as fh:
            return json.load(fh)

    # Llama 3.1 8B: llama3 scaling, head_dim 4096/32 = 128, full rotary.
    d = load("llama3.1-8b-instruct.json")
    kind, sc = hf_scaling(d)
    cases.append(make_case("llama3.1-8b-instruct", d["rope_theta"], kind, sc, 128, 131072,
                           d["max_position_embeddings"], config="llama3.1-8b-instruct.json", layer=0))

    # gpt-oss-20b: yarn (factor 32, truncate false), head_dim 64; all layers share the table.
    d = load("gpt-oss-20b.json")
    kind, sc = hf_scaling(d)
    cases.append(make_case("gpt-oss-20b", float(d["rope_theta"]), kind, sc, d["head_dim"], 131072,
                           d["max_position_embeddings"], config="gpt-oss-20b.json", layer=0))

    # Phi-3.5 (text): longrope, head_dim 3072/32 = 96; top-level original_max_position_embeddings
    # (moved into the scaling dict, as transformers' standardize_rope_params does).
    d = load("phi3-phi-3.5-vision-text.json")
    kind, sc = hf_scaling(d)
    sc = dict(sc, original_max_position_embeddings=d["original_max_position_embeddings"])
    mpe = d["max_position_embeddings"]
    cases.append(make_case("phi3.5-longrope-long", d["rope_theta"], kind, sc, 96, mpe, mpe,
                           config="phi3-phi-3.5-vision-text.json", layer=0))
    cases.append(make_case("phi3.5-longrope-short", d["rope_theta"], kind, sc, 96, 4096, mpe))

    # OLMo 3.1 32B: yarn with explicit attention_factor, head_dim 5120/40 = 128.
    d = load("olmo3.1-32b-instruct.json")
    kind, sc = hf_scaling(d)
    cases.append(make_case("olmo3.1-32b", float(d["rope_theta"]), kind, sc, 128, 65536,
                           d["max_position_embeddings"], config="olmo3.1-32b-instruct.json", layer=0))

    # Gemma 3 4B: linear factor 8 on global layers (theta 1e6), default rope theta 1e4 on the
    # sliding ones; text_config omits theta/head_dim, so the class defaults are used
    # (Gemma3TextConfig: rope_theta 1e6, rope_local_base_freq 1e4, head_dim 256,
    # max_position_embeddings 131072, sliding_window_pattern 6 -> layer 5 is the first global).
    d = load("gemma3-4b-it.json")["text_config"]
    kind, sc = hf_scaling(d)
    cases.append(make_case("gemma3-4b-global", 1000000.0, kind, sc, 256, 131072, 131072,
                           config="gemma3-4b-it.json", layer=5))
    cases.append(make_case("gemma3-4b-local", 10000.0, "default", {}, 256, 131072, 131072,
                           config="gemma3-4b-it.json", layer=0))
    return cases


def synthetic_cases():
    c = []
    c.append(make_case("default-128", 10000.0, "default", {}, 128, 8192, 4096))
    c.append(make_case("default-partial-glm4", 1000000.0, "default", {}, 64, 4096, 131072))
    c.append(make_case("default-phi2-r32", 10000.0, "default", {}, 32, 2048, 2048))
    c.append(make_case("mrope-alias", 10000000.0, "mrope", {"mrope_section": [11, 11, 10], "mrope_interleaved": True},
                       64, 4096, 262144))
    c.append(make_case("linear-4", 10000.0, "linear", {"factor": 4.0}, 128, 16384, 4096))
    c.append(make_case("dynamic-above", 10000.0, "dynamic", {"factor": 2.0}, 128, 16384, 4096))
    c.append(make_case("dynamic-below", 10000.0, "dynamic", {"factor": 2.0}, 128, 2048, 4096))
    c.append(make_case("dynamic-seqlen", 500000.0, "dynamic", {"factor": 4}, 64, 4096, 4096, seq_len=32768))
    c.append(make_case("llama3-r64", 500000.0, "llama3",
                       {"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 8192}, 64, 8192, 131072))
    c.append(make_case("yarn-deepseek-mscale", 10000.0, "yarn",
                       {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 0.707,
                        "original_max_position_embeddings": 4096}, 64, 8192, 163840))
    c.append(make_case("yarn-kimi-beta-equal", 50000.0, "yarn",
                       {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                        "original_max_position_embeddings": 4096}, 64, 8192, 131072))
    c.append(make_case("yarn-equal-range-no-truncate", 50000.0, "yarn",
                       {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "truncate": False,
                        "original_max_position_embeddings": 4096}, 64, 8192, 131072))
    c.append(make_case("yarn-no-factor", 1000000.0, "yarn",
                       {"original_max_position_embeddings": 32768}, 128, 4096, 131072))
    c.append(make_case("yarn-no-orig", 10000.0, "yarn", {"factor": 4.0}, 128, 4096, 4096))
    c.append(make_case("longrope-explicit", 10000.0, "longrope",
                       {"factor": 16.0, "attention_factor": 1.25, "original_max_position_embeddings": 2048,
                        "short_factor": [1.0 + 0.01 * i for i in range(16)],
                        "long_factor": [1.5 + 0.25 * i for i in range(16)]}, 32, 8192, 32768))
    return c


def main():
    out = {"generator": "tests/data/rope/gen_rope_refs.py",
           "source": "transformers src/transformers/modeling_rope_utils.py formulas, float64",
           "cases": synthetic_cases() + config_cases()}
    path = os.path.join(HERE, "rope_refs.json")
    with open(path, "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")
    print(f"wrote {len(out['cases'])} cases to {path}")


if __name__ == "__main__":
    main()
