// config: layer kinds (attention, sliding attention, no KV) from the layer-pattern keys.
#include <set>

#include "internal.hpp"

namespace fkv::config_detail {

std::optional<LayerKind> kind_from_name(const std::string& raw) {
  std::string s = lower(raw);
  static const auto& full =
      *new std::set<std::string>{"full_attention", "attention", "global", "full", "self_attention"};
  static const auto& sliding =
      *new std::set<std::string>{"sliding_attention", "local", "sliding", "chunked_attention"};
  static const auto& none = *new std::set<std::string>{
      "linear_attention", "conv", "mamba", "mamba2", "ssm",      "mlp",           "moe",
      "recurrent",        "rwkv", "no_op", "none",   "deltanet", "gated_deltanet"};
  if (full.count(s)) return LayerKind::FullAttention;
  if (sliding.count(s)) return LayerKind::SlidingAttention;
  if (none.count(s)) return LayerKind::NoAttention;
  return std::nullopt;
}

const char* kKnownKinds =
    "full_attention, attention, global, sliding_attention, local, chunked_attention (attention) or "
    "linear_attention, conv, mamba, mamba2, ssm, mlp, moe, recurrent, no_op, none (no KV)";

std::string type_name(LayerKind k) {
  return k == LayerKind::FullAttention      ? "full_attention"
         : k == LayerKind::SlidingAttention ? "sliding_attention"
                                            : "";
}

LayerKinds resolve_kinds(const Doc& doc, const Family& fam, int n) {
  LayerKinds plan;
  plan.kinds.resize(n);
  auto set_all = [&](auto fn) {
    for (int i = 0; i < n; ++i) plan.kinds[i] = fn(i);
  };

  if (Hit h = doc.find({"layer_types"})) {
    const json& list = doc.layer_list(h, n);
    set_all([&](int i) {
      const std::string p = h.path + "[" + std::to_string(i) + "]";
      if (!list[i].is_string()) doc.fail(p, "expected a layer type name, got " + show(list[i]));
      auto k = kind_from_name(list[i].get<std::string>());
      if (!k)
        doc.fail(
            p, "unknown layer type \"" + list[i].get<std::string>() + "\"; known: " + kKnownKinds);
      return Sourced<LayerKind>{*k, p + " = " + list[i].get<std::string>()};
    });
    // The names as written: RoPE parameters keyed by layer type use them ("chunked_attention").
    for (int i = 0; i < n; ++i)
      plan.type_names.push_back(
          plan.kinds[i].value == LayerKind::NoAttention ? "" : lower(list[i].get<std::string>()));
  } else if (Hit h = doc.find({"layers_block_type"})) {
    const json& list = doc.layer_list(h, n);
    set_all([&](int i) {
      const std::string p = h.path + "[" + std::to_string(i) + "]";
      if (!list[i].is_string()) doc.fail(p, "expected a block type name, got " + show(list[i]));
      auto k = kind_from_name(list[i].get<std::string>());
      if (!k)
        doc.fail(
            p, "unknown block type \"" + list[i].get<std::string>() + "\"; known: " + kKnownKinds);
      return Sourced<LayerKind>{*k, p + " = " + list[i].get<std::string>()};
    });
  } else if (Hit h = doc.find({"attn_type_list", "decoder_attention_types"})) {
    // MiniMax: 1 = softmax attention, 0 = lightning (linear) attention with no KV cache (vLLM
    // minimax_text_01.py builds MiniMaxText01LinearAttention for 0, MiniMaxText01Attention for 1).
    const json& list = doc.layer_list(h, n);
    set_all([&](int i) {
      const Hit e{&list[i], h.path + "[" + std::to_string(i) + "]"};
      const long long v = doc.integer(e);
      if (v != 0 && v != 1)
        doc.fail(e.path,
                 "expected 1 (softmax attention) or 0 (linear attention), got " + list[i].dump());
      return Sourced<LayerKind>{
          v == 1 ? LayerKind::FullAttention : LayerKind::NoAttention,
          e.path + " = " + std::to_string(v) +
              (v == 1 ? " (softmax attention)" : " (linear attention: no KV)")};
    });
  } else if (Hit h = doc.find({"hybrid_override_pattern"})) {
    // Nemotron-H: 'M' mamba, '*' attention, '-' mlp, 'E' moe.
    std::string pat = doc.string(h);
    if (pat.empty()) doc.fail(h.path, "the pattern is empty; it must have one character per layer");
    if ((int)pat.size() != n)
      doc.fail(h.path, "has " + std::to_string(pat.size()) + " characters but the model has " +
                           std::to_string(n) + " layers");
    set_all([&](int i) {
      char c = pat[i];
      const std::string src = h.path + "[" + std::to_string(i) + "] = '" + std::string(1, c) + "'";
      if (c == '*') return Sourced<LayerKind>{LayerKind::FullAttention, src + " (attention)"};
      if (c == 'M' || c == '-' || c == 'E')
        return Sourced<LayerKind>{LayerKind::NoAttention, src + " (no attention)"};
      doc.fail(h.path, std::string("unknown character '") + c + "' at position " +
                           std::to_string(i) +
                           "; expected 'M' (mamba), '*' (attention), '-' (mlp) or 'E' (moe)");
    });
  } else if (Hit hp = doc.find({"attn_layer_period"})) {
    // Jamba: attention iff i % period == offset (transformers JambaConfig.layers_block_type).
    int period = doc.positive_int(hp);
    Hit ho = doc.find({"attn_layer_offset"});
    int offset = ho ? doc.nonneg_int(ho) : 0;
    if (offset >= period)
      doc.fail(ho ? ho.path : "attn_layer_offset",
               "must be smaller than attn_layer_period (" + std::to_string(period) + ")");
    const std::string rule = hp.path + "=" + std::to_string(period) + ", " +
                             (ho ? ho.path : "attn_layer_offset (default)") + "=" +
                             std::to_string(offset);
    set_all([&](int i) {
      bool attn = i % period == offset;
      return Sourced<LayerKind>{attn ? LayerKind::FullAttention : LayerKind::NoAttention,
                                rule + ": layer % period " + (attn ? "==" : "!=") + " offset"};
    });
  } else if (Hit h = doc.find({"block_configs"})) {
    // DeciLM / Nemotron-NAS: attention.no_op or attention.replace_with_linear -> no KV.
    const json& list = doc.layer_list(h, n);
    set_all([&](int i) {
      const std::string p = h.path + "[" + std::to_string(i) + "]";
      if (!list[i].is_object()) doc.fail(p, "expected an object, got " + show(list[i]));
      if (!present(list[i], "attention"))
        return Sourced<LayerKind>{LayerKind::FullAttention, p + " (no attention entry: attention)"};
      const json& a = list[i]["attention"];
      if (!a.is_object()) doc.fail(p + ".attention", "expected an object, got " + show(a));
      for (const char* k : {"no_op", "replace_with_linear"}) {
        if (present(a, k)) {
          Hit b{&a[k], p + ".attention." + k};
          if (doc.boolean(b)) return Sourced<LayerKind>{LayerKind::NoAttention, b.path + " = true"};
        }
      }
      return Sourced<LayerKind>{LayerKind::FullAttention,
                                p + ".attention (no_op/replace_with_linear false)"};
    });
  } else if (Hit h = doc.find({"attention_layers"})) {
    // gpt_neo format: "global" / "local" per layer.
    const json& list = doc.layer_list(h, n);
    set_all([&](int i) {
      const std::string p = h.path + "[" + std::to_string(i) + "]";
      if (!list[i].is_string())
        doc.fail(p, "expected \"global\" or \"local\", got " + show(list[i]));
      auto k = kind_from_name(list[i].get<std::string>());
      if (!k || *k == LayerKind::NoAttention)
        doc.fail(p, "expected \"global\" or \"local\", got \"" + list[i].get<std::string>() + "\"");
      return Sourced<LayerKind>{*k, p + " = " + list[i].get<std::string>()};
    });
  } else if (Hit h = doc.find({"attention_types"})) {
    // gpt_neo format: [[["global", "local"], repeat], ...] expands to one entry per layer.
    if (!h.v->is_array() || h.v->empty())
      doc.fail(h.path, "expected a non-empty list of [[types...], repeat]");
    std::vector<std::string> names;
    for (size_t j = 0; j < h.v->size(); ++j) {
      const json& item = (*h.v)[j];
      const std::string p = h.path + "[" + std::to_string(j) + "]";
      if (!item.is_array() || item.size() != 2 || !item[0].is_array() || item[0].empty())
        doc.fail(p, "expected [[\"global\", \"local\"], repeat], got " + show(item));
      int rep = doc.positive_int(Hit{&item[1], p + "[1]"});
      for (int r = 0; r < rep; ++r)
        for (const json& t : item[0]) {
          if (!t.is_string()) doc.fail(p + "[0]", "expected layer type names, got " + show(t));
          names.push_back(t.get<std::string>());
        }
    }
    if ((int)names.size() != n)
      doc.fail(h.path, "expands to " + std::to_string(names.size()) + " layers but the model has " +
                           std::to_string(n));
    set_all([&](int i) {
      auto k = kind_from_name(names[i]);
      if (!k || *k == LayerKind::NoAttention)
        doc.fail(h.path, "unknown attention type \"" + names[i] + "\"");
      return Sourced<LayerKind>{*k,
                                h.path + " (expanded)[" + std::to_string(i) + "] = " + names[i]};
    });
  } else if (fam.arch->kinds == KindDefault::AlternateEvenSliding) {
    // transformers gemma2: is_sliding = not bool(layer_idx % 2) -> even layers sliding.
    const std::string src =
        fam.rule("alternates, even layers sliding (is_sliding = not bool(layer_idx % 2))");
    set_all([&](int i) {
      return Sourced<LayerKind>{i % 2 == 0 ? LayerKind::SlidingAttention : LayerKind::FullAttention,
                                src};
    });
  } else if (Hit h = fam.reads("sliding_window_pattern") ? doc.find({"sliding_window_pattern"})
                                                         : Hit{}) {
    // Gemma3 / Cohere2: sliding iff (i + 1) % pattern != 0.
    int p = doc.positive_int(h);
    set_all([&](int i) {
      bool sliding = (i + 1) % p != 0;
      return Sourced<LayerKind>{
          sliding ? LayerKind::SlidingAttention : LayerKind::FullAttention,
          h.path + "=" + std::to_string(p) + ": sliding iff (layer + 1) % " + std::to_string(p) +
              " != 0 (transformers gemma3/cohere2 configuration layer_types default)"};
    });
  } else if (Hit h = doc.find({"full_attention_interval"})) {
    // Qwen3-Next: full attention every `interval` layers, linear attention otherwise.
    int p = doc.positive_int(h);
    set_all([&](int i) {
      bool full = (i + 1) % p == 0;
      return Sourced<LayerKind>{full ? LayerKind::FullAttention : LayerKind::NoAttention,
                                h.path + "=" + std::to_string(p) +
                                    ": full attention iff (layer + 1) % " + std::to_string(p) +
                                    " == 0, else linear_attention"};
    });
  } else if (Hit h = doc.class_default("layer_types_period")) {
    // The config class computes layer_types in __init__ (Gemma 3: five sliding, one full;
    // gpt-oss: alternating): full iff (i + 1) % period == 0.
    int p = doc.positive_int(h);
    set_all([&](int i) {
      bool full = (i + 1) % p == 0;
      return Sourced<LayerKind>{full ? LayerKind::FullAttention : LayerKind::SlidingAttention,
                                h.path + "=" + std::to_string(p) +
                                    ": layer_types as the class computes them, full iff (layer "
                                    "+ 1) % " +
                                    std::to_string(p) + " == 0, else sliding_attention"};
    });
  } else if (fam.arch->kinds == KindDefault::AllSlidingIfWindow) {
    // Mistral / Starcoder2: the attention passes config.sliding_window to every layer.
    Hit win = doc.find({"sliding_window"});
    const std::string src = win ? fam.rule("-> every layer slides (" + win.path + " is set)")
                                : std::string("default: full_attention (no sliding_window)");
    set_all([&](int) {
      return Sourced<LayerKind>{win ? LayerKind::SlidingAttention : LayerKind::FullAttention, src};
    });
  } else if (fam.arch->kinds == KindDefault::KeyRequired) {
    doc.refuse("layer_types",
               "missing: \"" + fam.arch->name +
                   "\" configs say which layers are attention layers "
                   "with layer_types or attn_type_list, and without one the engines disagree (" +
                   fam.arch->citation + "); add one of them");
  } else {
    // Qwen2/Qwen3 style: use_sliding_window -> layers >= max_window_layers slide.
    Hit use = doc.find({"use_sliding_window"});
    Hit win = doc.find({"sliding_window"});
    if (use && doc.boolean(use) && win) {
      Hit mw = doc.find({"max_window_layers"});
      int from = mw ? doc.nonneg_int(mw) : 0;
      set_all([&](int i) {
        bool sliding = i >= from;
        return Sourced<LayerKind>{
            sliding ? LayerKind::SlidingAttention : LayerKind::FullAttention,
            use.path + " = true, " + (mw ? mw.path : std::string("max_window_layers (absent)")) +
                "=" + std::to_string(from) + ": sliding iff layer >= " + std::to_string(from)};
      });
    } else {
      set_all([&](int) {
        return Sourced<LayerKind>{LayerKind::FullAttention,
                                  std::string("default: full_attention (no layer pattern key)")};
      });
    }
  }
  if (plan.type_names.size() != plan.kinds.size()) {
    plan.type_names.clear();
    for (auto& k : plan.kinds) plan.type_names.push_back(type_name(k.value));
  }
  return plan;
}

}  // namespace fkv::config_detail
