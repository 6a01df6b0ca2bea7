#!/usr/bin/env python3
"""paralab's fidelity on published runs nobody tuned it to (issue 68).

Simulates every [[run]] of runs.toml, uncalibrated, on the datasheet topology of its GPU, with
the same defaults for every row, and compares with the published throughput. Writes a markdown
report: one line per run, then mean absolute, max and signed mean error per group and half
(split.toml). Error = predicted / published throughput - 1 (positive: predicted faster).

    python3 bench/sim/validation/run.py [--paralab build/apps/paralab] [--out FILE] [--only ID]

Rows the simulator cannot describe yet (mixtures of experts, latent attention) are listed with
the reason and left out of the statistics. Needs Python 3.11 (tomllib).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
GROUPS = ["h100_bf16", "h100_fp8", "a100", "small", "moe", "non_megatron"]
MODEL_KEYS = ["num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "ffn_hidden_size",
              "vocab_size", "seq_length", "activation", "normalization", "kv_channels"]
UNSUPPORTED = {"num_experts": "mixture of experts (issue 64)", "multi_latent_attention": "latent attention (issue 64)",
               "window_size": "sliding-window attention", "mtp_num_layers": "multi-token prediction (issue 64)"}


def topology(gpu):
    """The shipped topology for a published GPU, with the overrides its variant needs."""
    g = gpu.upper()
    if "H200" in g:
        return "dgx-h200", []
    if "H100" in g:
        return "dgx-h100", (["topology.device.memory_gib=96"] if "96GB" in g else [])
    if "A100" in g:
        return "dgx-a100", (["topology.device.memory_gib=40"] if "40GB" in g else [])
    return None, []


def scenario(run):
    """The run as a scenario TOML, plus the approximations it takes; or a reason it cannot be."""
    m, p, t = run["model"], run["parallel"], run["training"]
    for k, why in UNSUPPORTED.items():
        if m.get(k):
            return None, [], "not simulated: " + why
    topo, sets = topology(run["gpu"])
    if topo is None:
        return None, [], "not simulated: no topology for " + run["gpu"]
    notes = []
    if m.get("qk_layernorm"):
        notes.append("qk_layernorm left out")
    fsdp = p.get("fsdp") or 0
    zero = 3 if fsdp else int(p.get("zero_stage") or 0)
    if fsdp and fsdp < p["data"] * p["context"]:
        notes.append("hybrid sharding (FSDP group %d) as ZeRO-3 over all %d" % (fsdp, p["data"] * p["context"]))
    v = int(p.get("virtual_pipeline_stages") or 1)
    split = []
    L, pp = m["num_layers"], p["pipeline"]
    if L % (pp * v) != 0 and (L + 2) % (pp * v) == 0:
        # Megatron counts the embedding and the loss as layers of the first and last virtual
        # stage (account_for_embedding/loss_in_pipeline_split; NVIDIA's MLPerf Training v5.1
        # Llama 3.1 405B configs set them, as ASYM_PP_EMBED / ASYM_PP_LOSS, with PP 8 x VP 8).
        split = ["account_for_embedding_in_pipeline_split = true", "account_for_loss_in_pipeline_split = true"]
        notes.append("%d layers + embedding + loss on %d x %d virtual stages" % (L, pp, v))
    elif pp > 2 and L % (pp * v) != 0 and v == 1:
        # Otherwise explicit first/last sizes: the middle stages get m layers and the first and
        # last split the rest, no more than m each.
        mid = -(-L // pp)
        while L - (pp - 2) * mid > 2 * mid:
            mid += 1
        rest = L - (pp - 2) * mid
        if rest >= 2:
            split = ["decoder_first_pipeline_num_layers = %d" % (rest // 2),
                     "decoder_last_pipeline_num_layers = %d" % (rest - rest // 2)]
            notes.append("%d layers on %d stages as %d + %d x %d + %d" % (L, pp, rest // 2, pp - 2, mid, rest - rest // 2))
    lines = ["[model]"] + ["%s = %s" % (k, json.dumps(m[k])) for k in MODEL_KEYS if k in m]
    lines += ["[training]", "global_batch_size = %d" % t["global_batch_size"],
              "micro_batch_size = %d" % t["micro_batch_size"], 'precision = "%s"' % t["precision"],
              'recompute = "%s"' % t["recompute"]]
    lines += ["[parallel]", "tensor = %d" % p["tensor"], "pipeline = %d" % p["pipeline"],
              "context = %d" % p["context"], "data = %d" % p["data"], "zero_stage = %d" % zero,
              "sequence_parallel = %s" % ("true" if p.get("sequence_parallel") else "false"),
              "virtual_pipeline_stages = %d" % v] + split
    if v > 1:
        lines.append('schedule = "interleaved"')
    lines += ["[cluster]", 'topology = "%s"' % topo, "nodes = %d" % (run["gpus"] // 8)]
    return "\n".join(lines) + "\n", sets, "; ".join(notes)


def predicted(metric, j, gpus):
    """The simulated figure in the published metric's terms, and whether it is a throughput."""
    if metric == "tokens_per_s_per_gpu":
        return j["tokens_per_s"] / gpus, True
    if metric == "tokens_per_s":
        return j["tokens_per_s"], True
    if metric == "tflops_per_gpu":
        return j["model_tflops_per_gpu"], True
    if metric == "mfu":
        return j["mfu"], True
    if metric == "step_time_s":
        return j["step_time_s"], False
    raise ValueError("unknown published_metric " + metric)


def simulate(paralab, run):
    text, sets, note = scenario(run)
    if text is None:
        return None, note
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, run["id"] + ".toml")
        with open(f, "w") as fh:
            fh.write(text)
        cmd = [paralab, "simulate", f, "--json"] + [x for s in sets for x in ("--set", s)]
        r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, "refused: " + r.stderr.strip().splitlines()[-1]
    j = json.loads(r.stdout)
    value, throughput = predicted(run["published_metric"], j, run["gpus"])
    pub = run["published_value"]
    ratio = value / pub if throughput else pub / value
    return {"predicted": value, "error": ratio - 1, "fits": j["fits_in_memory"], "mfu": j["mfu"]}, note


def stats(errors):
    if not errors:
        return "-"
    a = [abs(e) for e in errors]
    return "%d | %.1f %% | %.1f %% | %+.1f %%" % (len(errors), 100 * statistics.mean(a), 100 * max(a),
                                                  100 * statistics.mean(errors))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--paralab", default=os.path.join(ROOT, "build", "apps", "paralab"))
    ap.add_argument("--out")
    ap.add_argument("--only")
    a = ap.parse_args()
    runs = tomllib.load(open(os.path.join(HERE, "runs.toml"), "rb"))["run"]
    split = tomllib.load(open(os.path.join(HERE, "split.toml"), "rb"))
    half = {i: "development" for i in split["development"]}
    half.update({i: "held_out" for i in split["held_out"]})
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = ["| run | half | groups | published | predicted | error | notes |", "|---|---|---|---|---|---|---|"]
    results = []
    for run in runs:
        if a.only and run["id"] != a.only:
            continue
        res, note = simulate(a.paralab, run)
        h = half.get(run["id"], "?")
        pub = "%g %s" % (run["published_value"], run["published_metric"])
        if res is None:
            out.append("| %s | %s | %s | %s | - | - | %s |" % (run["id"], h, ", ".join(run["groups"]), pub, note))
            continue
        if not res["fits"]:
            note = (note + "; " if note else "") + "over memory in the simulator"
        out.append("| %s | %s | %s | %s | %.4g | %+.1f %% | %s |" % (run["id"], h, ", ".join(run["groups"]), pub,
                                                                  res["predicted"], 100 * res["error"], note))
        results.append((run, h, res["error"]))
    summary = ["| group | half | runs | mean abs error | max abs error | signed mean |", "|---|---|---|---|---|---|"]
    for g in GROUPS + ["megatron", "all"]:
        for hv in ["development", "held_out"]:
            e = [err for run, hh, err in results if hh == hv and (
                g == "all" or (g == "megatron" and "non_megatron" not in run["groups"]) or g in run["groups"])]
            summary.append("| %s | %s | %s |" % (g, hv, stats(e)))
    simulated = len(results)
    text = "\n".join([
        "# Fidelity on published runs (`bench/sim/validation/run.py`)", "",
        "Uncalibrated simulations of the %d runs of `bench/sim/validation/runs.toml` (sources in its" % len(runs),
        "SOURCES.md), each on the datasheet topology of its GPU with paralab's defaults; error =",
        "predicted / published throughput - 1 (positive: predicted faster). paralab %s; %d runs" % (commit, simulated),
        "simulated, the others listed with the reason. Targets (issue 68): mean absolute error within 8 %",
        "on Megatron-family rows and 15 % on the rest, in both halves, and no group's signed mean",
        "beyond 8 %.", "", "## Summary", ""] + summary + ["", "## Runs", ""] + out) + "\n"
    write_report(text, a.out)


def write_report(text, out):
    """The report to stdout, and to `out` when given, keeping the hand-written "## Reading"
    section an existing `out` ends with."""
    if out and os.path.exists(out):
        with open(out) as fh:
            old = fh.read()
        if "\n## Reading\n" in old:
            text = text.rstrip("\n") + "\n\n" + old[old.index("\n## Reading\n") + 1:]
    if out:
        with open(out, "w") as fh:
            fh.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
