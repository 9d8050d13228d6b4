"""Writes a run as JSON (the record), Markdown (the tables) and PNG plots."""

from __future__ import annotations

import json
import os
from collections import defaultdict

OVERHEAD_FAMILIES = ("B1", "B2", "B3", "B4", "B5", "B8", "B10")


def write_json(run: dict, path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(run, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def _fmt_ns(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:.2f} ms"
    if v >= 1e4:
        return f"{v / 1e3:.1f} us"
    return f"{v:.0f} ns"


def _value(case: dict, entry: dict) -> str:
    if "unsupported" in entry:
        return "unsupported"
    if case["unit"] == "GB/s":
        return f"{entry['gbps']:.2f} GB/s"
    return _fmt_ns(entry["median_ns"])


def _ratio_cell(r: dict | None) -> str:
    if not r:
        return ""
    return f"{r['ratio']:.2f}x ({r['q1']:.2f}-{r['q3']:.2f})"


def _paired_cell(r: dict | None, spec_ref: str = "") -> str:
    if not r or r.get("paired_median") is None:
        return "-"
    cell = f"{r['paired_median']:.2f}x ({r['q1']:.2f}-{r['q3']:.2f}; {r['min']:.2f}-{r['max']:.2f})"
    if r.get("ref") and r["ref"] != spec_ref:
        cell += f" vs {r['ref']}"  # what "fastest-other" resolved to in that run
    return cell


def _header(run: dict) -> list[str]:
    meta = run["meta"]
    versions = meta["versions"]
    first = [k for k in ("python", "numpy", "torch") if k in versions]
    rest = [k for k in versions if k not in first]
    rounds = meta["settings"]["repeats"]
    return [
        f"# Benchmark run `{meta['name']}`",
        "",
        f"- date: {meta['date']}, mode: {meta['mode']}, command: `{meta['command']}`",
        f"- machine: {meta['machine']}",
        f"- load average: {meta.get('load_average_start', 'not recorded')} at the start, "
        f"{meta.get('load_average_end', 'not recorded')} at the end",
        "- versions: " + ", ".join(f"{k} {versions[k]}" for k in first + rest),
        f"- dlpackarray build: {meta.get('build', 'not recorded')}",
        (
            f"- samples: {rounds} paired rounds per contender "
            f"({meta['settings']['big_repeats']} for large copies), contenders interleaved"
            + (f", {meta['runs']} runs" if meta.get("runs", 1) > 1 else "")
            + "; times are medians, spread is the interquartile range."
        ),
        (
            "- Ratios are taken within one run: time ratios (ns cases; < 1 is faster than the "
            "reference) or throughput ratios (GB/s cases; > 1 is faster). Tables give the "
            "ratio of medians with the interquartile range of the per-round paired ratios in "
            "brackets; the floor column is the ratio to the case's floor contender (the least "
            "any implementation could cost on that route), '-' where none is measured."
        ),
    ]


def _target_rows(cases: list[dict]) -> list[str]:
    lines = [
        "| case | contender | against | ratio or ns/op (IQR) | judged on | target | status |",
        "|---|---|---|---|---|---|---|",
    ]
    for case in cases:
        for t in case.get("targets", []):
            unit = " ns" if t.get("kind") == "ns" or t["ref"] == "absolute" else ""
            if "ratio" not in t:
                cell = "n/a"
            elif unit:
                cell = f"{t['ratio']:.0f} ns ({t['q1']:.0f}-{t['q3']:.0f})"
            elif t.get("judged_on") == "paired median":
                cell = f"{t['paired_median']:.2f}x ({t['q1']:.2f}-{t['q3']:.2f})"
            else:
                cell = f"{t['ratio']:.2f}x ({t['q1']:.2f}-{t['q3']:.2f})"
            lines.append(
                f"| {case['name']} | {t['contender']} | {t['ref']} | {cell} | "
                f"{t.get('judged_on', 'ratio of medians')} | {t['op']} {t['value']}{unit} | "
                f"{t['status']} |"
            )
    return lines


def runs_summary(run: dict) -> list[dict]:
    """Per target: its ratio in every run and whether it held in all of them."""
    rows: dict = {}
    for k, cases in enumerate(run.get("runs", [run["cases"]])):
        for case in cases:
            for t in case.get("targets", []):
                spec = t.get("target_ref", t["ref"])
                key = (case["name"], t["contender"], spec, t["op"], t["value"])
                row = rows.setdefault(
                    key,
                    {
                        "case": case["name"],
                        "contender": t["contender"],
                        "ref": spec,
                        "target": f"{t['op']} {t['value']}",
                        "runs": [],
                    },
                )
                row["runs"].append(
                    {k2: t.get(k2) for k2 in ("paired_median", "q1", "q3", "min", "max")}
                    | {
                        "ratio": t.get("ratio"),
                        "status": t["status"],
                        "run": k + 1,
                        "ref": t["ref"],
                    }
                )
    out = list(rows.values())
    for row in out:
        row["held_in_all"] = all(r["status"] == "met" for r in row["runs"])
    return out


def _floor_line(case: dict) -> str:
    floor = case.get("floor")
    if not floor:
        return "floor: - (no floor contender in this case)"
    e = case["contenders"].get(floor, {})
    if "median_ns" not in e:
        return f"floor: `{floor}` (not measured: {e.get('unsupported', 'missing')})"
    return f"floor: `{floor}`, {_value(case, e)}"


def _case_tables(cases: list[dict]) -> list[str]:
    lines: list[str] = []
    by_family = defaultdict(list)
    for case in cases:
        by_family[case["family"]].append(case)
    for family in sorted(by_family):
        lines += ["", f"## {family}", ""]
        for case in by_family[family]:
            lines += [f"### {case['name']}: {case['title']}", ""]
            if "error" in case:
                lines += [f"error: {case['error']}", ""]
                continue
            unit = "GB/s" if case["unit"] == "GB/s" else "ns/op"
            lines += [
                f"anchor: `{case.get('anchor_resolved')}`; {_floor_line(case)}",
                "",
                f"| contender | statement | median {unit} | spread (IQR) | ratio to anchor "
                "| ratio to floor |",
                "|---|---|---|---|---|---|",
            ]
            notes = []
            for label, e in case["contenders"].items():
                spread = f"±{100 * e['rel_iqr'] / 2:.1f}%" if "rel_iqr" in e else ""
                ratio = _ratio_cell(e.get("ratio_to_anchor"))
                floor = _ratio_cell(e.get("ratio_to_floor")) or "-"
                if "unsupported" in e:
                    ratio = e["unsupported"].replace("|", "\\|").splitlines()[0][:160]
                    floor = "-"
                lines.append(
                    f"| {label} | `{e['stmt']}` | {_value(case, e)} | {spread} | {ratio} "
                    f"| {floor} |"
                )
                if e.get("note"):
                    notes.append(f"- {label}: {e['note']}")
            lines += [""] + notes + ([""] if notes else [])
    return lines


def markdown(run: dict) -> str:
    lines = _header(run) + ["", "## Targets", ""]
    runs = run.get("runs")
    if runs:
        lines += [
            "Each run: the median of the per-round paired ratios, then in brackets their "
            "interquartile range and their extremes.",
            "",
            "| case | contender | against | target | "
            + " | ".join(f"run {k + 1}" for k in range(len(runs)))
            + " | held in all runs |",
            "|---|---|---|---|" + "---|" * len(runs) + "---|",
        ]
        for row in runs_summary(run):
            cells = " | ".join(_paired_cell(r, row["ref"]) for r in row["runs"])
            lines.append(
                f"| {row['case']} | {row['contender']} | {row['ref']} | {row['target']} | "
                f"{cells} | {'yes' if row['held_in_all'] else 'no'} |"
            )
        for k, cases in enumerate(runs):
            lines += ["", f"# Run {k + 1}", "", "## Targets", ""] + _target_rows(cases)
            lines += _case_tables(cases)
    else:
        lines += _target_rows(run["cases"])
        lines += _case_tables(run["cases"])
    flat = scaling_summary(run)
    if flat:
        lines += [
            "",
            "## B7 flatness",
            "",
            "| series | contender | min median | max median | max / min |",
            "|---|---|---|---|---|",
        ]
        for row in flat:
            lines.append(
                f"| {row['series']} | {row['contender']} | {_fmt_ns(row['min'])} | "
                f"{_fmt_ns(row['max'])} | {row['max'] / row['min']:.2f} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def scaling_summary(run: dict) -> list[dict]:
    series = defaultdict(list)
    for case in run["cases"]:
        if case["family"] != "B7" or "error" in case:
            continue
        for label, e in case["contenders"].items():
            if "median_ns" in e:
                series[(case["params"]["series"], label)].append(e["median_ns"])
    return [
        {"series": s, "contender": c, "min": min(v), "max": max(v)}
        for (s, c), v in sorted(series.items())
    ]


def plots(run: dict, prefix: str) -> list[str]:
    """Writes ``<prefix>_overhead.png``, ``_copies.png``, ``_scaling.png``; returns paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    cases = [c for c in run["cases"] if "error" not in c]

    over = [c for c in cases if c["family"] in OVERHEAD_FAMILIES]
    if over:
        fig, axes = plt.subplots(
            len(over),
            1,
            figsize=(
                9,
                1.0 + 0.42 * sum(len(c["contenders"]) for c in over) + 0.5 * len(over),
            ),
            squeeze=False,
        )
        for ax, case in zip(axes[:, 0], over, strict=False):
            labels, med, lo, hi, colors = [], [], [], [], []
            for label, e in case["contenders"].items():
                if "median_ns" not in e:
                    labels.append(f"{label} (unsupported)")
                    (
                        med.append(0),
                        lo.append(0),
                        hi.append(0),
                        colors.append("lightgray"),
                    )
                    continue
                labels.append(label)
                med.append(e["median_ns"])
                lo.append(e["median_ns"] - e["q1_ns"])
                hi.append(e["q3_ns"] - e["median_ns"])
                colors.append(
                    "tab:orange"
                    if label.startswith("dlpackarray")
                    else "tab:blue"
                    if label == case.get("anchor_resolved")
                    else "tab:gray"
                )
            y = range(len(labels))
            ax.barh(y, med, xerr=[lo, hi], color=colors)
            ax.set_yticks(list(y), labels, fontsize=8)
            ax.invert_yaxis()
            ax.set_xscale("log")
            ax.set_title(case["name"], fontsize=9, loc="left")
            ax.tick_params(axis="x", labelsize=8)
        axes[-1, 0].set_xlabel(
            "ns per call (median, IQR bars; orange = dlpackarray, blue = anchor)"
        )
        fig.tight_layout()
        path = f"{prefix}_overhead.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    copies = [c for c in cases if c["family"] == "B6"]
    if copies:
        sizes = sorted({c["nbytes"] for c in copies})
        fig, axes = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 4), squeeze=False)
        for ax, size in zip(axes[0], sizes, strict=False):
            group = [c for c in copies if c["nbytes"] == size]
            contenders = ["dlpackarray", "numpy", "memcpy"]
            width = 0.27
            for k, label in enumerate(contenders):
                xs, ys, err = [], [], [[], []]
                for i, c in enumerate(group):
                    e = c["contenders"].get(label)
                    if not e or "gbps" not in e:
                        continue
                    xs.append(i + (k - 1) * width)
                    ys.append(e["gbps"])
                    err[0].append(e["gbps"] - e["gbps_q1"])
                    err[1].append(e["gbps_q3"] - e["gbps"])
                ax.bar(
                    xs,
                    ys,
                    width,
                    yerr=err,
                    label=label,
                    color={
                        "dlpackarray": "tab:orange",
                        "numpy": "tab:blue",
                        "memcpy": "tab:gray",
                    }[label],
                )
            ax.set_xticks(
                range(len(group)),
                [f"{c['params']['ndim']}d\n{c['params']['layout']}" for c in group],
                fontsize=8,
            )
            ax.set_title(f"copy=True export, {size >> 20} MB", fontsize=9)
            ax.set_ylabel("GB/s (output bytes)")
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = f"{prefix}_copies.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    scaling = [c for c in cases if c["family"] == "B7"]
    if scaling:
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        for ax, series, xlabel in (
            (axes[0], "size", "array bytes"),
            (axes[1], "ndim", "ndim"),
        ):
            group = sorted(
                (c for c in scaling if c["params"]["series"] == series),
                key=lambda c: c["params"]["x"],
            )
            for label, color in (("dlpackarray", "tab:orange"), ("numpy", "tab:blue")):
                pts = [
                    (c["params"]["x"], c["contenders"][label])
                    for c in group
                    if "median_ns" in c["contenders"].get(label, {})
                ]
                if not pts:
                    continue
                xs = [p[0] for p in pts]
                ax.errorbar(
                    xs,
                    [p[1]["median_ns"] for p in pts],
                    yerr=[
                        [p[1]["median_ns"] - p[1]["q1_ns"] for p in pts],
                        [p[1]["q3_ns"] - p[1]["median_ns"] for p in pts],
                    ],
                    marker="o",
                    label=label if label == "numpy" else "dlpackarray (wrap + export)",
                    color=color,
                )
            if series == "size":
                ax.set_xscale("log", base=2)
            ax.set_ylim(bottom=0)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("ns per call")
            ax.set_title(f"B7: wrap + export vs {series}", fontsize=9)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
        fig.tight_layout()
        path = f"{prefix}_scaling.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
