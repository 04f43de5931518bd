#!/usr/bin/env python3
"""Regenerates the engine coverage list and the config-class defaults fkv-jit compiles in.

Inputs (read, never imported by the product):
  * transformers (installed: `pip install transformers`, no torch needed): CONFIG_MAPPING_NAMES,
    the causal-LM and image-text-to-text model mappings, and every config class, instantiated
    with no arguments;
  * a vLLM wheel and an sglang wheel (`pip download --no-deps vllm sglang -d DIR`): vLLM's
    vllm/model_executor/models/registry.py (_TEXT_GENERATION_MODELS, _MULTIMODAL_MODELS,
    _SPECULATIVE_DECODING_MODELS) and sglang's sglang/srt/models/*.py (EntryClass), read from the
    wheel zips as text.

Outputs:
  data/model_types.json             every model_type the engines serve as a text decoder, the
                                    text part of a VLM, or a draft, with where it came from;
  data/class_defaults.json          per model_type: the config class and the defaults of the
                                    fields the reader resolves;
  src/config/generated/model_data.cpp  both, as C++ data (the library never reads the JSON).

Usage: scripts/gen-model-registry-data.py --wheels DIR [--repo .]
"""
import argparse
import ast
import glob
import json
import os
import re
import zipfile

import transformers
from transformers.models.auto import configuration_auto

# The fields the reader resolves (docs/config-rules.md section 2). A class default is recorded
# only when it does not depend on other arguments (checked by instantiating twice).
FIELDS = [
    "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "kv_channels",
    "multi_query_attention", "multi_query_group_num", "partial_rotary_factor", "rotary_pct",
    "rotary_dim", "rotary_emb_base", "rope_local_base_freq", "rms_norm_eps", "layer_norm_epsilon",
    "norm_eps", "layer_norm_eps", "layernorm_epsilon", "norm_epsilon", "max_position_embeddings",
    "n_positions", "sliding_window", "sliding_window_pattern", "use_sliding_window",
    "max_window_layers", "use_qk_norm", "qk_layernorm", "qk_norm", "full_attention_interval",
    "no_rope_layer_interval", "nope_layer_interval", "attn_layer_period", "attn_layer_offset",
    "attention_chunk_size", "original_max_position_embeddings", "rope_ratio",
]
VARY = {"num_attention_heads": 16, "hidden_size": 1920, "num_hidden_layers": 6,
        "num_key_value_heads": 4}


def plain(v):
    return v is None or isinstance(v, (bool, int, float, str)) or (
        isinstance(v, (list, dict)) and json.dumps(v, default=str) is not None)


def rope_of(cfg):
    """(rope_theta, rope_parameters) the class holds, in the file's form."""
    rp = getattr(cfg, "rope_parameters", None)
    if rp is None:
        rp = getattr(cfg, "rope_scaling", None)
    theta = getattr(cfg, "rope_theta", None)
    if not isinstance(theta, (int, float)) or isinstance(theta, bool):
        theta = None
    if isinstance(rp, dict) and rp:
        if all(isinstance(v, dict) for v in rp.values()):  # keyed by layer type
            full = rp.get("full_attention") or next(iter(rp.values()))
            return full.get("rope_theta", theta), rp
        return rp.get("rope_theta", theta), rp
    return theta, None


def signature_default(cls, field):
    import inspect
    try:
        p = inspect.signature(cls.__init__).parameters.get(field)
    except (TypeError, ValueError):
        return None
    if p is None or p.default is inspect.Parameter.empty:
        return None
    return p.default


def defaults_of(cls):
    """The class's defaults for FIELDS. A value is kept only when it does not depend on other
    arguments: the class is instantiated again with other sizes (VARY) and with other heads
    only; a field that changes is derived (num_key_value_heads = num_attention_heads, head_dim =
    hidden_size // heads, ...) and the reader derives it the same way."""
    try:
        a = cls()
    except Exception as e:  # noqa: BLE001 - some classes need arguments
        return None, f"{type(e).__name__}: {e}"[:200]
    others = []  # (the arguments changed, the instance)
    for kw in (VARY, {"num_attention_heads": VARY["num_attention_heads"]},
               {"hidden_size": VARY["hidden_size"]}, {"num_hidden_layers": 6}):
        try:
            others.append((kw, cls(**kw)))
        except Exception:  # noqa: BLE001
            pass
    out = {}
    for f in FIELDS:
        try:
            v = getattr(a, f)
        except Exception:  # noqa: BLE001 - missing, or per-layer (heterogeneous) attributes
            v = None
        if v is None:
            # Consumed by __init__: the signature's default is what the class used.
            v = signature_default(cls, f)
            if v is not None and plain(v) and not isinstance(v, (list, dict)):
                out[f] = v
            continue
        if not plain(v):
            continue
        stable = True
        for kw, b in others:
            if f in kw:
                continue  # set explicitly there
            try:
                vb = getattr(b, f)
            except Exception:  # noqa: BLE001
                vb = None
            if vb != v:
                stable = False
        if stable:
            out[f] = v
    # layer_types computed by __init__ from a period (Gemma 3: 5 sliding, 1 full; gpt-oss:
    # alternating): recorded as the period when it holds for every layer count tried.
    def period_of(c):
        lt = getattr(c, "layer_types", None)
        if not isinstance(lt, list) or not lt:
            return None
        kinds = set(lt)
        if kinds == {"full_attention"}:
            return None
        if kinds != {"full_attention", "sliding_attention"}:
            return None
        for p in range(2, len(lt) + 1):
            if all((x == "full_attention") == ((i + 1) % p == 0) for i, x in enumerate(lt)):
                return p
        return None
    try:
        p = period_of(a)
        if p and all(period_of(b) == p for _, b in others):
            out["layer_types_period"] = p
    except Exception:  # noqa: BLE001
        pass
    others = [b for _, b in others]
    try:
        theta, rp = rope_of(a)
        rest = [rope_of(b) for b in others]
    except Exception:  # noqa: BLE001
        return out, None
    if theta is not None and all(t == theta for t, _ in rest):
        out["rope_theta"] = float(theta)
    if rp is not None and all(r == rp for _, r in rest):
        kinds = list(rp.values()) if all(isinstance(v, dict) for v in rp.values()) else [rp]
        if len(kinds) > 1 or any(k.get("rope_type", k.get("type", "default")) != "default"
                                 for k in kinds):
            out["rope_parameters"] = rp
        # Keyed by layer type: the sliding layers' theta is what older configs call
        # rope_local_base_freq (Gemma 3), read when the file gives only rope_scaling.
        if isinstance(rp.get("sliding_attention"), dict) and "rope_theta" in rp["sliding_attention"]:
            out["rope_local_base_freq"] = float(rp["sliding_attention"]["rope_theta"])
        # A partial rotary factor inside the dict is the class's default too.
        for k in kinds:
            if "partial_rotary_factor" in k and "partial_rotary_factor" not in out:
                out["partial_rotary_factor"] = k["partial_rotary_factor"]
    return out, None


def text_type_of(cls):
    try:
        c = cls()
        t = c.get_text_config()
        if t is not c and getattr(t, "model_type", None):
            return t.model_type
    except Exception:  # noqa: BLE001
        pass
    return None


def dict_literal(src, name):
    m = re.search(r"^" + re.escape(name) + r"\s*=\s*\{", src, re.M)
    if not m:
        return {}
    start = m.end() - 1
    depth = 0
    for i in range(start, len(src)):
        depth += src[i] == "{"
        depth -= src[i] == "}"
        if depth == 0:
            break
    node = ast.parse(src[start:i + 1], mode="eval").body
    out = {}
    for k, v in zip(node.keys, node.values):
        if isinstance(k, ast.Constant) and isinstance(v, ast.Tuple):
            out[k.value] = v.elts[0].value if isinstance(v.elts[0], ast.Constant) else ""
    return out


def vllm_archs(wheel):
    with zipfile.ZipFile(wheel) as z:
        src = z.read("vllm/model_executor/models/registry.py").decode()
    archs = {}
    for name in ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS",
                 "_SPECULATIVE_DECODING_MODELS"):
        for arch, module in dict_literal(src, name).items():
            archs[arch] = (name, module.split(".")[-1])
    return archs


def sglang_archs(wheel):
    archs = {}
    with zipfile.ZipFile(wheel) as z:
        for n in z.namelist():
            if not re.match(r"sglang/srt/models/[^/]+\.py$", n):
                continue
            src = z.read(n).decode(errors="replace")
            m = re.search(r"^EntryClass\s*=\s*(\[[^\]]*\]|\w+)", src, re.M)
            if not m:
                continue
            for arch in re.findall(r"\w+", m.group(1)):
                archs[arch] = os.path.basename(n)[:-3]
    return archs


def modeling_auto_mappings():
    """The *_MAPPING_NAMES tables of transformers' modeling_auto.py, read as source (importing the
    module needs torch)."""
    path = os.path.join(os.path.dirname(configuration_auto.__file__), "modeling_auto.py")
    tree = ast.parse(open(path).read())
    out = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        name = getattr(node.targets[0], "id", "")
        if not (name.startswith("MODEL_") and name.endswith("_MAPPING_NAMES")):
            continue
        v = node.value
        if isinstance(v, ast.Call) and v.args:
            v = v.args[0]
        try:
            val = ast.literal_eval(v)
        except ValueError:
            continue
        out[name] = dict(val)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheels", required=True)
    ap.add_argument("--repo", default=os.path.join(os.path.dirname(__file__), ".."))
    args = ap.parse_args()
    vwheel = glob.glob(os.path.join(args.wheels, "vllm-*.whl"))[0]
    swheel = glob.glob(os.path.join(args.wheels, "sglang-*.whl"))[0]

    config_names = configuration_auto.CONFIG_MAPPING_NAMES
    mappings = modeling_auto_mappings()
    causal = mappings["MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"]
    itt = mappings["MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"]
    # Architecture name -> model_type, over every transformers model mapping.
    arch_to_type = {}
    for name, m in mappings.items():
        if True:
            for t, archs in m.items():
                for a in archs if isinstance(archs, (list, tuple)) else [archs]:
                    arch_to_type.setdefault(a, t)

    types = {}

    def add(t, source):
        types.setdefault(t, {"model_type": t, "sources": []})
        if source not in types[t]["sources"]:
            types[t]["sources"].append(source)

    for t in causal:
        add(t, "transformers:causal-lm")
    for t in itt:
        add(t, "transformers:image-text-to-text")
    # The text part of each VLM / wrapper: the model_type of its default text config.
    for t in list(types):
        try:
            cls = configuration_auto.CONFIG_MAPPING[t]  # (its .get() answers None)
        except KeyError:
            cls = None
        tt = text_type_of(cls) if cls else None
        if tt and tt != t:
            types[t]["text_model_type"] = tt
            add(tt, f"transformers:text-config-of:{t}")
    for arch, (table, module) in vllm_archs(vwheel).items():
        t = arch_to_type.get(arch) or module
        add(t, f"vllm:{arch}")
        if t == module and arch not in arch_to_type:
            types[t]["named_by_module"] = True
    for arch, module in sglang_archs(swheel).items():
        t = arch_to_type.get(arch) or module
        add(t, f"sglang:{arch}")
        if t == module and arch not in arch_to_type:
            types[t]["named_by_module"] = True

    defaults = {}
    for t in sorted(types):
        if t not in config_names:
            continue
        cls = configuration_auto.CONFIG_MAPPING[t]
        d, err = defaults_of(cls)
        types[t]["config_class"] = cls.__name__
        if d is not None:
            defaults[t] = {"class": cls.__name__, "defaults": d}

    vv = re.search(r"vllm-([^-]+)-", os.path.basename(vwheel)).group(1)
    sv = re.search(r"sglang-([^-]+)-", os.path.basename(swheel)).group(1)
    versions = {"transformers": transformers.__version__, "vllm": vv, "sglang": sv}
    repo = os.path.abspath(args.repo)
    os.makedirs(os.path.join(repo, "data"), exist_ok=True)
    with open(os.path.join(repo, "data/model_types.json"), "w") as f:
        json.dump({"versions": versions, "generator": "scripts/gen-model-registry-data.py",
                   "model_types": [types[t] for t in sorted(types)]}, f, indent=1,
                  sort_keys=True)
        f.write("\n")
    with open(os.path.join(repo, "data/class_defaults.json"), "w") as f:
        json.dump({"versions": {"transformers": transformers.__version__},
                   "generator": "scripts/gen-model-registry-data.py",
                   "class_defaults": defaults}, f, indent=1, sort_keys=True, default=float)
        f.write("\n")

    # C++ data: one row per model_type.
    def lit(s):
        return json.dumps(s)
    rows = []
    for t in sorted(types):
        e = types[t]
        d = defaults.get(t)
        rows.append("    {%s, %s, %s, %s, %s}," % (
            lit(t), lit(" ".join(e["sources"])), lit(e.get("text_model_type", "")),
            lit(d["class"] if d else e.get("config_class", "")),
            "R\"fkv(" + json.dumps(d["defaults"], sort_keys=True) + ")fkv\"" if d else '""'))
    os.makedirs(os.path.join(repo, "src/config/generated"), exist_ok=True)
    with open(os.path.join(repo, "src/config/generated/model_data.cpp"), "w") as f:
        f.write(f"""// GENERATED by scripts/gen-model-registry-data.py; do not edit.
// transformers {versions['transformers']}, vLLM {versions['vllm']}, sglang {versions['sglang']}.
// Every model_type the engines serve as a text decoder, the text part of a VLM or a draft, with
// where it came from, its default text config's model_type (wrappers), its config class and
// that class's defaults for the fields the reader resolves (JSON).
#include "model_data.hpp"

namespace fkv::config_detail {{

const std::vector<EngineModelType>& engine_model_types() {{
  // Immortal: engines call the library from atexit handlers, after static destructors ran.
  static const auto& table = *new std::vector<EngineModelType>{{
{chr(10).join(rows)}
  }};
  return table;
}}

const char* engine_versions() {{
  return "transformers {versions['transformers']}, vLLM {versions['vllm']}, sglang {versions['sglang']}";
}}

}}  // namespace fkv::config_detail
""")
    print(f"{len(types)} model types, {len(defaults)} with class defaults; {versions}")


if __name__ == "__main__":
    main()
