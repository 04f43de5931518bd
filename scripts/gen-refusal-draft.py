#!/usr/bin/env python3
"""Drafts the refusal rows of src/config/verdicts.cpp from the engines' modeling files.

Not run by the build. It reads data/model_types.json, the installed transformers, and vLLM and
sglang wheels, and classifies every model_type that no supported registry entry covers and that
is not a multimodal wrapper, by what its modeling file holds: MLA keys (or a DeepSeek-V2/V3 /
GLM-DSA attention parent), an engine module name rather than a config model_type,
cross-attention, no RoPE (absolute positions, ALiBi, SSM), K norm across heads; anything else
with RoPE is "not yet checked". The rows were then corrected by hand where a file was read
closer (the reasons in verdicts.cpp win); a model_type moved to a supported entry in
architectures.cpp drops out on the next run.

Usage: gen-refusal-draft.py --wheels DIR [--repo .]   (prints C++ rows on stdout)
"""
import argparse
import ast
import glob
import json
import os
import re
import tempfile
import zipfile

from transformers.models.auto import configuration_auto as ca

TF = os.path.dirname(os.path.dirname(ca.__file__))  # .../transformers/models


def vllm_modules(wheel):
    with zipfile.ZipFile(wheel) as z:
        src = z.read("vllm/model_executor/models/registry.py").decode()
    out = {}
    for name in ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS", "_SPECULATIVE_DECODING_MODELS"):
        m = re.search(r"^" + name + r"\s*=\s*\{", src, re.M)
        start, depth = m.end() - 1, 0
        for i in range(start, len(src)):
            depth += src[i] == "{"
            depth -= src[i] == "}"
            if depth == 0:
                break
        node = ast.parse(src[start:i + 1], mode="eval").body
        for k, v in zip(node.keys, node.values):
            if isinstance(k, ast.Constant) and isinstance(v, ast.Tuple):
                out[k.value] = v.elts[0].value.split(".")[-1]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheels", required=True)
    ap.add_argument("--repo", default=os.path.join(os.path.dirname(__file__), ".."))
    args = ap.parse_args()
    repo = os.path.abspath(args.repo)
    tmp = tempfile.mkdtemp()
    vwheel = glob.glob(os.path.join(args.wheels, "vllm-*.whl"))[0]
    swheel = glob.glob(os.path.join(args.wheels, "sglang-*.whl"))[0]
    with zipfile.ZipFile(vwheel) as z:
        z.extractall(tmp, [n for n in z.namelist() if n.startswith("vllm/model_executor/models/")])
    with zipfile.ZipFile(swheel) as z:
        z.extractall(tmp, [n for n in z.namelist() if n.startswith("sglang/srt/models/")])
    vx = os.path.join(tmp, "vllm/model_executor/models")
    sx = os.path.join(tmp, "sglang/srt/models")
    vmods = vllm_modules(vwheel)
    types = json.load(open(os.path.join(repo, "data/model_types.json")))["model_types"]
    arch_src = open(os.path.join(repo, "src/config/architectures.cpp")).read().replace("\n", " ")
    supported = set()
    for x in re.findall(r"\.model_types = \{([^}]*)\}", arch_src):
        supported |= set(re.findall(r'"([\w.-]+)"', x))

    def read(p):
        try:
            return open(p).read()
        except OSError:
            return ""

    for e in types:
        t = e["model_type"]
        if t in supported or e.get("text_model_type"):
            continue
        files = []
        try:
            d = ca.CONFIG_MAPPING[t].__module__.split(".")[2]
            for f in ("modular_%s.py" % d, "modeling_%s.py" % d):
                if os.path.exists(os.path.join(TF, d, f)):
                    files.append(("transformers src/transformers/models/%s/%s" % (d, f),
                                  read(os.path.join(TF, d, f))))
        except Exception:  # noqa: BLE001 - not a transformers model_type
            pass
        for s in e["sources"]:
            if s.startswith("vllm:") and s[5:] in vmods:
                p = os.path.join(vx, vmods[s[5:]] + ".py")
                if os.path.exists(p):
                    files.append(("vLLM vllm/model_executor/models/%s.py" % vmods[s[5:]], read(p)))
        if not files:
            for s in e["sources"]:
                if not s.startswith("sglang:"):
                    continue
                for p in glob.glob(sx + "/*.py"):
                    src = read(p)
                    if re.search(r"^EntryClass\s*=.*\b" + re.escape(s[7:]) + r"\b", src, re.M | re.S):
                        files.append(("sglang python/sglang/srt/models/" + os.path.basename(p), src))
                        break
                if files:
                    break
        src = files[0][1] if files else ""
        allsrc = "\n".join(s for _, s in files)
        inherits = re.findall(r"class \w*Attention\((\w+Attention)\)", src)[:2]
        mla = "kv_lora_rank" in allsrc or any(
            re.match(r"(Deepseek(V2|V3)|GlmMoeDsa)Attention", x) for x in inherits)
        cross = bool(re.search(r"encoder_hidden_states|cross_attn|CrossAttention|is_cross_attention", src))
        rope = bool(re.search(r"rotary|apply_rope|get_rope|RotaryEmbedding", src))
        knorm = bool(re.search(r"k_norm|k_layernorm|key_layernorm|k_ln\b", src))
        across = bool(re.search(r"k_norm\s*=\s*\w*Norm\(\s*(config\.|self\.)?num_key_value_heads\s*\*", src))
        ssm = bool(re.search(r"[Mm]amba|selective_scan|ssm_state|linear_attn|LinearAttention|GatedDeltaNet|ShortConv", allsrc))
        pos = bool(re.search(r"position_embeddings\s*=\s*nn\.Embedding|wpe\s*=|embed_positions", src)) or "alibi" in src.lower()
        module_only = e.get("named_by_module") and not any(s.startswith("transformers") for s in e["sources"])
        if mla:
            why = "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V"
        elif module_only and re.search(r"(_|^)(mtp|nextn)$|_mtp_|eagle|dflash|dspark|xpress|lilicorr|extract_hidden_states|_assistant$", t):
            why = ("an engine draft/MTP module name, not a config.json model_type: its config carries "
                   "the target model_type (or a speculators draft format), whose verdict applies")
        elif cross:
            why = "cross-attention (encoder-decoder or cross-attention layers): K/V come from another sequence"
        elif module_only and not rope and not knorm:
            why = ("an engine module name, not a config.json model_type (a multimodal wrapper or "
                   "reward/classification head): the nested text config's model_type decides")
        elif not rope and ssm:
            why = "no attention with RoPE (SSM / recurrent layers)"
        elif not rope and pos:
            why = "no RoPE: absolute / learned positions or ALiBi"
        elif not rope:
            why = "no RoPE attention in its modeling code (encoder, audio or vision model)"
        elif across:
            why = "K norm across all heads (RMSNorm over num_key_value_heads * head_dim)"
        else:
            why = ("not yet checked against its modeling code (RoPE attention whose K norm, RoPE "
                   "pairing and layer kinds no registry entry states)")
        cite = files[0][0] if files else "no modeling file in the engines read (" + " ".join(e["sources"]) + ")"
        print("      {%s, %s, %s}," % (json.dumps(t), json.dumps(why), json.dumps(cite)))


if __name__ == "__main__":
    main()
