"""Figures for the notebooks: heatmaps, regression weights, rooflines, breakdowns, speedups.

Every function returns a matplotlib Figure with a title, axis labels with units and, for
heatmaps, a colour bar with units. Power-of-two axes are drawn as evenly spaced
categories labelled with their values, i.e. on a log2 scale.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import LogNorm, Normalize, TwoSlopeNorm
from matplotlib.patches import Rectangle

from paradnn import families
from paradnn.analysis.results import Results, Rows, results_of
from paradnn.analysis.roofline import Ceilings

MAX_ANNOTATED_CELLS = 36  # larger panels show colour only: the numbers would not be legible
FAILED_MARK = {"oom": "OOM", "skipped": "OOM?", "timeout": "t/o", "error": "err"}
# Each way a cell can lack a value, drawn apart: (hatch, colour, legend words). Out of memory is
# what observation 6 turns on; a timeout or an error says nothing of memory; a cell nobody
# measured is never white (the colour of a 1.0x speedup).
CELL_MARKS = {
    "oom": ("xx", "firebrick", "OOM: out of memory"),
    "skipped": ("x", "lightcoral", "OOM?: predicted not to fit, skipped"),
    "timeout": ("//", "darkorange", "t/o: timed out (or unfinished in the original data)"),
    "error": ("..", "purple", "err: error"),
    "missing": ("\\\\", "silver", "not measured"),
}


def _grid(
    fam: Results, family: str, value: str, panel_value, panel_column: str | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows_axis, columns_axis, panel_axis = families.get(family).heatmap
    panel_axis = panel_column or panel_axis
    sub = fam.where(**({panel_axis: panel_value} if panel_axis else {}))
    ok = sub.ok().frame
    values = ok.pivot_table(index=rows_axis, columns=columns_axis, values=value, aggfunc="median")
    # A cell of several failed rows shows the failure that says most: out of memory first.
    rank = {state: i for i, state in enumerate(CELL_MARKS)}
    failures = sub.failed().frame.sort_values("state", key=lambda s: s.map(rank).fillna(len(rank)), kind="stable")
    failed = failures.groupby([rows_axis, columns_axis])["state"].first().unstack()
    rows = sorted(set(values.index) | set(failed.index))
    cols = sorted(set(values.columns) | set(failed.columns))
    return values.reindex(index=rows, columns=cols), failed.reindex(index=rows, columns=cols)


def _aggregated_axes(df: pd.DataFrame, family: str) -> list[str]:
    """Axes that vary in the data but are not drawn: the heatmaps show their median."""
    fam = families.get(family)
    sub = df[df["family"] == family]
    return [a.name for a in fam.axes if a.name not in fam.heatmap and a.name in sub and sub[a.name].nunique() > 1]


def heatmaps(
    rows: Rows,
    family: str,
    value: str,
    title: str,
    colorbar: str,
    scale: float = 1.0,
    fmt: str = "{:.3g}",  # three digits: a full cell reads 100, not 1e+02
    log_color: bool = False,
    center: float | None = None,
    cmap: str = "viridis",
    marked: str | None = None,
    panels_by: str | None = None,
) -> plt.Figure:
    """One heatmap panel per value of the family's panel axis (or of the column ``panels_by``,
    e.g. ``platform``: Fig. 7's one panel per platform); failed cells marked (OOM, t/o, err).

    ``marked`` names a boolean column: cells where it is true get a white square outline
    (the prediction report marks the measured cells of a grid filled by prediction), drawn
    in black on light cells and white on dark ones.
    """
    spec = families.get(family)
    rows_axis, columns_axis, panel_axis = (spec.axis(a) if a else None for a in spec.heatmap)
    results = results_of(rows).where(family=family)
    fam = results.frame
    panel_column = panels_by or (panel_axis.name if panel_axis else None)
    panels = sorted(fam[panel_column].dropna().unique()) if panel_column else [None]
    ncols = min(3, max(len(panels), 1))
    nrows = math.ceil(max(len(panels), 1) / ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(4.4 * ncols + 1.2, 3.6 * nrows), squeeze=False, layout="constrained")
    axs = grid.ravel()
    for ax in axs[len(panels) :]:
        ax.set_visible(False)
    ok = results.ok().frame[value].dropna() * scale
    positive = ok[ok > 0]
    if center is not None and len(positive):
        lo, hi = min(positive.min(), center / 1.01), max(positive.max(), center * 1.01)
        norm = TwoSlopeNorm(vcenter=center, vmin=lo, vmax=hi)
    elif log_color and len(positive):
        norm = LogNorm(positive.min(), max(positive.max(), positive.min() * 1.01))
    else:
        norm = Normalize(ok.min() if len(ok) else 0, ok.max() if len(ok) else 1)
    image = None
    shown_marks: set[str] = set()
    for ax, panel_value in zip(axs, panels):
        values, failed = _grid(results, family, value, panel_value, panels_by)
        marks = _marks(fam, family, marked, panel_value, values) if marked and not panels_by else None
        image = ax.imshow(values.to_numpy(dtype=float) * scale, origin="lower", aspect="auto", cmap=cmap, norm=norm)
        ax.grid(False)
        annotate = values.size <= MAX_ANNOTATED_CELLS
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                v = values.iat[i, j]
                if pd.notna(v) and annotate:
                    ax.text(j, i, fmt.format(v * scale), ha="center", va="center", fontsize=8, color=_ink(image, v * scale))
                elif pd.isna(v):
                    kind = failed.iat[i, j] if pd.notna(failed.iat[i, j]) else "missing"
                    hatch, colour, _ = CELL_MARKS.get(kind, CELL_MARKS["error"])
                    ax.add_patch(
                        Rectangle(
                            (j - 0.5, i - 0.5),
                            1,
                            1,
                            facecolor="#f4f4f4" if kind == "missing" else "none",
                            hatch=hatch,
                            edgecolor=colour,
                            lw=0,
                        )
                    )
                    shown_marks.add(kind if kind in CELL_MARKS else "error")
                    if annotate and kind != "missing":
                        ax.text(j, i, FAILED_MARK.get(kind, "?"), ha="center", va="center", fontsize=7, color=colour)
                if marks is not None and marks.iat[i, j] is True:
                    edge = _ink(image, v * scale) if pd.notna(v) else "black"
                    ax.add_patch(Rectangle((j - 0.42, i - 0.42), 0.84, 0.84, fill=False, edgecolor=edge, lw=1.5))
        ax.set_xticks(range(values.shape[1]), [_tick(c) for c in values.columns], rotation=45)
        ax.set_yticks(range(values.shape[0]), [_tick(r) for r in values.index])
        ax.set_xlabel(columns_axis.display)
        ax.set_ylabel(rows_axis.display)
        if panels_by:
            ax.set_title(str(panel_value), fontsize=10)
        elif panel_axis:
            ax.set_title(f"{panel_axis.title} = {_tick(panel_value)}", fontsize=10)
    if image is not None:
        fig.colorbar(image, ax=axs.tolist(), label=colorbar, shrink=0.9)
    if shown_marks:  # what each mark means, below the panels (never over the data)
        handles = [
            Rectangle((0, 0), 1, 1, facecolor="#f4f4f4" if k == "missing" else "none", hatch=hatch, edgecolor=colour, label=words)
            for k, (hatch, colour, words) in CELL_MARKS.items()
            if k in shown_marks
        ]
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 3), fontsize=8, frameon=False)
    agg = _aggregated_axes(fam, family)
    fig.suptitle(title + (f" (median over {', '.join(agg)})" if agg else ""), fontsize=12)
    return fig


def _marks(fam: pd.DataFrame, family: str, column: str, panel_value, like: pd.DataFrame) -> pd.DataFrame:
    """Per heatmap cell: does any row in it have ``column`` true? Shaped like ``like``."""
    rows_axis, columns_axis, panel_axis = families.get(family).heatmap
    sub = fam[(fam[panel_axis] == panel_value) if panel_axis else np.ones(len(fam), bool)]
    cells = sub.groupby([rows_axis, columns_axis])[column].any().unstack()
    return cells.reindex(index=like.index, columns=like.columns).astype(object).where(cells.notna(), False)


def _tick(value) -> str:
    """An axis value as a tick label: integers without a decimal point."""
    numeric = isinstance(value, (int, float, np.integer, np.floating))
    return str(int(value)) if numeric and float(value).is_integer() else str(value)


def _ink(image, value: float) -> str:
    """Black on light cells, white on dark ones."""
    r, g, b, _ = image.cmap(image.norm(value))
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


def coefficients(results: dict, title: str, xlabel: str) -> plt.Figure:
    """Regression weights with 95% confidence intervals, one panel per family."""
    fig, axs = plt.subplots(1, max(len(results), 1), figsize=(4.5 * max(len(results), 1), 3.2), squeeze=False)
    for ax, (family, res) in zip(axs[0], results.items()):
        coef = res.coefficients
        if coef.empty:
            ax.text(0.5, 0.5, "not enough data", ha="center", va="center", transform=ax.transAxes)
        else:
            y = np.arange(len(coef))
            err = np.vstack([coef["coef"] - coef["ci_low"], coef["ci_high"] - coef["coef"]])
            ax.barh(y, coef["coef"], xerr=err, color=sns.color_palette()[0], capsize=3)
            ax.set_yticks(y, [f"log2 {f}" if res.form == "log2" else f for f in coef.index])
            ax.axvline(0, color="black", lw=0.8)
        ax.set_title(f"{families.get(family).title}  (R² = {res.r_squared:.2f}, n = {res.n})", fontsize=10)
        ax.set_xlabel(xlabel)
    fig.suptitle(title, fontsize=12)
    fig.tight_layout()
    return fig


def roofline(points: pd.DataFrame, ceilings: Ceilings, title: str, hue: str = "family") -> plt.Figure:
    """Achieved FLOP/s against operational intensity, under the platform's two roofs."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    lo = min(points["intensity"].min() / 2, ceilings.ridge / 10) if len(points) else ceilings.ridge / 100
    hi = max(points["intensity"].max() * 2, ceilings.ridge * 10) if len(points) else ceilings.ridge * 100
    x = np.logspace(math.log10(lo), math.log10(hi), 200)
    ax.plot(x, np.minimum(ceilings.peak_flops, ceilings.bandwidth * x) / 1e9, color="black", lw=1.5, label="roofline")
    ax.axvline(ceilings.ridge, color="grey", ls=":", lw=1)
    ax.text(ceilings.ridge, ceilings.peak_flops / 1e9 * 1.1, f" ridge {ceilings.ridge:.0f} FLOPs/B", fontsize=8, color="grey")
    if len(points):
        data = points.assign(gflops=points["achieved_flops"] / 1e9)
        sns.scatterplot(data=data, x="intensity", y="gflops", hue=hue, ax=ax, s=30)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("operational intensity (FLOPs per byte)")
    ax.set_ylabel("performance (GFLOP/s)")
    roofs = f"peak {ceilings.peak_flops / 1e9:.0f} GFLOP/s, {ceilings.bandwidth / 1e9:.0f} GB/s ({ceilings.source})"
    ax.set_title(f"{title}\n{roofs}")
    ax.legend(fontsize=8, loc="lower right", title=hue, title_fontsize=8)  # the colours' key, named
    fig.tight_layout()
    return fig


def op_breakdown(breakdown: pd.DataFrame, ceilings: Ceilings | None, title: str) -> plt.Figure:
    """Left: time share by op category per configuration. Right: the categories on the roofline."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [1.1, 1]}, layout="constrained")
    shares = breakdown.pivot_table(index="label", columns="category", values="time_share", aggfunc="sum").fillna(0)
    shares.mul(100).plot.barh(stacked=True, ax=left, colormap="tab10", width=0.7, legend=False)
    left.set_xlabel("share of step time (%)")
    left.set_ylabel("")
    left.set_yticks(range(len(shares)), [label.replace("-", "\n", 2) for label in shares.index], fontsize=7)
    handles, names = left.get_legend_handles_labels()
    fig.legend(handles, names, fontsize=7, ncols=4, loc="outside lower left", frameon=False)  # under the axis labels
    left.set_title("time share by op category")
    pts = breakdown[(breakdown["flops"] > 0) & (breakdown["bytes"] > 0) & (breakdown["time_s"] > 0)]
    if ceilings is not None:
        x = np.logspace(-2, max(3, math.log10(ceilings.ridge * 10)), 200)
        right.plot(x, np.minimum(ceilings.peak_flops, ceilings.bandwidth * x) / 1e9, color="black", lw=1.5)
        right.axvline(ceilings.ridge, color="grey", ls=":", lw=1)
        pts, above = _split_by_roof(pts, "flops_per_sec", ceilings.peak_flops, ceilings.bandwidth)
        _note_above(right, above)
    sns.scatterplot(
        data=pts.assign(gflops=pts["flops_per_sec"] / 1e9),
        x="intensity",
        y="gflops",
        hue="category",
        style="label",
        ax=right,
        s=50,
        legend="brief",
    )
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("operational intensity (FLOPs per byte)")
    right.set_ylabel("performance (GFLOP/s)")
    right.set_title("op categories on the roofline")
    if right.get_legend_handles_labels()[0]:  # nothing to label when no op has both FLOPs and bytes
        right.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fig.suptitle(title, fontsize=12)
    return fig


def _split_by_roof(points: pd.DataFrame, flops_column: str, peak: float, bandwidth: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Points under their roof (drawn) and above it beyond measurement tolerance (left out, named)."""
    from paradnn.analysis.roofline import under_roof

    ok = under_roof(points["intensity"], points[flops_column], peak, bandwidth)
    return points[ok], points[~ok]


def _note_above(ax, above: pd.DataFrame) -> None:
    if len(above):
        names = ", ".join(sorted(set(above["category"])))
        ax.text(
            0.01,
            0.99,
            f"left out, above the roof (a timing artefact): {names}",
            transform=ax.transAxes,
            fontsize=7,
            va="top",
            color="firebrick",
        )


def paired_scatter(table: pd.DataFrame, xlabel: str, ylabel: str, title: str, scale: float = 100.0) -> plt.Figure:
    """Each configuration measured two ways (baseline on x, target on y), with y = x."""
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    sns.scatterplot(x=table["baseline"] * scale, y=table["target"] * scale, hue=table["family"], ax=ax)
    hi = max(table["baseline"].max(), table["target"].max()) * scale * 1.05 if len(table) else 1
    ax.plot([0, hi], [0, hi], color="grey", ls="--", lw=1, label="equal")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def speedup_scatter(table: pd.DataFrame, title: str, baseline: str, target: str) -> plt.Figure:
    """Speedup against parameter count, coloured by batch size (log scales)."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sns.scatterplot(data=table, x="params", y="speedup", hue="batch", palette="viridis", hue_norm=LogNorm(), ax=ax, s=25)
    ax.axhline(1, color="grey", ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log", base=2)
    ax.set_xlabel("trainable parameters (log scale)")
    ax.set_ylabel(f"speedup of {target} over {baseline} (x, log2 scale)")
    ax.set_title(title)
    ax.legend(title="batch size", fontsize=7)
    fig.tight_layout()
    return fig


def speedup_distributions(tables: dict[str, pd.DataFrame], title: str) -> plt.Figure:
    """Box plot of per-configuration speedups for each comparison, split by family."""
    frames = [t.assign(comparison=name) for name, t in tables.items() if len(t)]
    fig, ax = plt.subplots(figsize=(8, 4))
    if frames:
        data = pd.concat(frames, ignore_index=True)
        sns.boxplot(data=data, x="comparison", y="speedup", hue="family", ax=ax, fliersize=0)
        sns.stripplot(
            data=data, x="comparison", y="speedup", hue="family", dodge=True, ax=ax, size=3, legend=False, palette="dark:black"
        )
    ax.axhline(1, color="grey", ls="--", lw=1)
    ax.set_yscale("log", base=2)
    ax.tick_params(axis="x", labelrotation=25)  # long comparison names must not overlap
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    ax.set_xlabel("")
    ax.set_ylabel("speedup (x, log2 scale)")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def trace_figures(traces: pd.DataFrame, peak_flops: float, bandwidth: float, title: str) -> plt.Figure:
    """The original TPU v2 traces: utilisation against memory bandwidth per configuration,
    and op categories on the roofline (ridge = peak / bandwidth, 75 FLOPs/byte on TPU v2)."""
    whole = traces[traces["category"] == "all"]
    ops = traces[(traces["category"] != "all") & traces["intensity"].notna() & (traces["intensity"] > 0)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
    sns.scatterplot(data=whole, x="memory_bandwidth", y="flops_perc", ax=left, s=20)
    left.set_xlabel("memory bandwidth utilisation (% of peak)")
    left.set_ylabel("FLOPS utilisation (% of peak)")
    left.set_title(f"{len(whole)} traced FC configurations")
    ridge = peak_flops / bandwidth
    x = np.logspace(-2, 4, 200)
    right.plot(x, np.minimum(peak_flops, bandwidth * x) / 1e12, color="black", lw=1.5)
    right.axvline(ridge, color="grey", ls=":", lw=1)
    right.text(ridge, peak_flops / 1e12 * 1.1, f" ridge {ridge:.0f} FLOPs/B", fontsize=8, color="grey")
    from paradnn.analysis.observations import CONTAINER_CATEGORIES

    achieved = ops.assign(tflops=ops["flops_perc"] / 100 * peak_flops / 1e12, flops=ops["flops_perc"] / 100 * peak_flops)
    achieved = achieved[(achieved["tflops"] > 0) & ~achieved["category"].isin(CONTAINER_CATEGORIES)]
    achieved, above = _split_by_roof(achieved, "flops", peak_flops, bandwidth)
    _note_above(right, above)
    sns.scatterplot(data=achieved, x="intensity", y="tflops", hue="category", ax=right, s=12, alpha=0.6)
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("operational intensity (FLOPs per byte)")
    right.set_ylabel("performance (TFLOP/s)")
    right.set_title(
        "op categories on the TPU v2 roofline\n(while loops left out: credited with their body's FLOPs, not its time)", fontsize=9
    )
    right.legend(fontsize=7, loc="lower right")
    fig.suptitle(title, fontsize=12)
    fig.tight_layout()
    return fig


def parameter_ranges(table: pd.DataFrame, title: str) -> plt.Figure:
    """Paper Fig. 1: the parameter range of each parameterized family's grid as a bar, real models as dots."""
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(table) + 1.4))
    y = np.arange(len(table))[::-1]
    for yi, (_, r) in zip(y, table.iterrows()):
        if r["kind"] == "range":
            ax.barh(yi, r["max"] - r["min"], left=r["min"], height=0.5, color=sns.color_palette()[0], alpha=0.8)
            ax.text(r["max"] * 1.3, yi, f"{r['min']:.2g} - {r['max']:.2g}", va="center", fontsize=8)
        else:
            ax.plot(r["max"], yi, "o", color=sns.color_palette()[3], markersize=8)
            ax.text(r["max"] * 1.3, yi, f"{r['max']:.3g}", va="center", fontsize=8)
    ax.set_yticks(y, table["title"])
    ax.set_xscale("log")
    ax.set_xlim(table["min"].min() / 3, table["max"].max() * 30)
    ax.set_xlabel("trainable parameters (log scale)")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def grouped_bars(
    table: pd.DataFrame, columns: list[str], title: str, ylabel: str, scale: float = 100.0, log: bool = False
) -> plt.Figure:
    """One group of bars per row of ``table`` (indexed by family name), one bar per column; ``log``
    draws the values on a log scale, so a platform at 1% and one at 50% are both readable."""
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(table) + 2), 4))
    titles = [families.get(f).title if f in families.names() else f for f in table.index]
    data = (table[columns] * scale).set_axis(titles)
    data.plot.bar(ax=ax, width=0.8, rot=30, logy=log)
    ax.set_xlabel("")
    ax.set_ylabel(ylabel + (", log scale" if log else ""))
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)  # beside the bars, never over them
    fig.tight_layout()
    return fig


def pair_speedup_bars(pairs: pd.DataFrame, title: str) -> plt.Figure:
    """Geometric-mean speedup per family for the chained pairs of platforms (one common set of
    configurations per family, :func:`paradnn.analysis.workloads.pair_speedups`), n under each
    family's name (log2 scale; 1 = equal)."""
    pairs = pairs[pairs["chained"]] if "chained" in pairs else pairs
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(pairs) + 2), 4))
    if len(pairs):
        n = pairs.groupby("family")["n"].first()
        data = pairs.assign(
            pair=pairs["target"] + " over " + pairs["baseline"],
            workload=[f"{families.get(f).title if f in families.names() else f}\n(n = {n[f]})" for f in pairs["family"]],
        )
        sns.barplot(data=data, x="workload", y="geomean", hue="pair", ax=ax)
        ax.set_yscale("log", base=2)
        sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1), frameon=False, fontsize=8, title=None)
    else:
        ax.text(0.5, 0.5, "no family measured on two platforms", ha="center", va="center", transform=ax.transAxes)
    ax.axhline(1, color="grey", ls="--", lw=1)
    ax.set_xlabel("")
    ax.set_ylabel("geometric-mean speedup in examples/s\n(x, log2 scale)")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def share_by_batch(rows: pd.DataFrame, value: str, title: str, ylabel: str, hue: str | None = None) -> plt.Figure:
    """A per-configuration share (percent of step time) against batch size, one box per batch (and ``hue`` value).

    A share is never drawn below zero: one measured below it (two timings taken call by call that
    differ by less than their noise) is drawn at 0 as a hollow mark and counted in a note."""
    data = rows.assign(batch=rows["label"].str.extract(r"bs_(\d+)")[0].astype(int))
    noise = data[value] < 0
    data = data.assign(**{value: data[value].clip(lower=0)})
    fig, ax = plt.subplots(figsize=(7, 3.8))
    order = sorted(data["batch"].unique())
    colour = {"hue": hue} if hue else {"color": sns.color_palette()[0]}
    sns.boxplot(data=data, x="batch", y=value, order=order, ax=ax, fliersize=0, **colour)
    # Each point in its box's colour (a box of one sample is a line: its point says whose it is), outlined.
    sns.stripplot(
        data=data,
        x="batch",
        y=value,
        order=order,
        ax=ax,
        size=3.5,
        alpha=0.9,
        linewidth=0.6,
        edgecolor="black",
        **({"hue": hue, "dodge": True, "legend": False} if hue else {"color": sns.color_palette()[0]}),
    )
    if hue:
        fig.set_size_inches(8.5, 3.8)
        ax.legend(title=hue, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    if noise.any():  # within noise: at zero, hollow, and said
        positions = {b: i for i, b in enumerate(order)}
        ax.scatter(
            [positions[b] for b in data.loc[noise, "batch"]],
            [0] * int(noise.sum()),
            s=28,
            facecolors="none",
            edgecolors="dimgrey",
            zorder=3,
        )
        ax.text(
            0.01,
            0.97,
            f"hollow: {int(noise.sum())} within noise (measured below 0), drawn at 0",
            transform=ax.transAxes,
            fontsize=7,
            color="dimgrey",
            va="top",
        )
    ax.set_ylim(bottom=0)
    ax.set_xlabel("batch size (examples, log2 scale)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def predicted_vs_measured(oof: pd.DataFrame, title: str, what: str = "predicted") -> plt.Figure:
    """Held-out predictions (or projections: ``what``) against measurements with their intervals,
    one panel per platform (log-log)."""
    platforms = list(dict.fromkeys(oof["platform"]))
    fig, axs = plt.subplots(1, max(len(platforms), 1), figsize=(4.6 * max(len(platforms), 1), 4.2), squeeze=False)
    for ax, platform in zip(axs[0], platforms):
        rows = oof[oof["platform"] == platform]
        err = np.vstack([rows["predicted_s"] - rows["low_s"], rows["high_s"] - rows["predicted_s"]]) * 1e3
        inside = (rows["measured_s"] >= rows["low_s"]) & (rows["measured_s"] <= rows["high_s"])
        for ok, colour, name in ((True, sns.color_palette()[0], "inside its interval"), (False, "firebrick", "outside")):
            part = inside == ok
            ax.errorbar(
                rows["measured_s"][part] * 1e3,
                rows["predicted_s"][part] * 1e3,
                yerr=err[:, part.to_numpy()],
                fmt="o",
                ms=2.5,
                lw=0.5,
                alpha=0.6,
                color=colour,
                label=f"{name} ({part.sum()})",
            )
        lo, hi = (rows[["measured_s", "low_s"]].min().min() * 1e3 * 0.8, rows[["measured_s", "high_s"]].max().max() * 1e3 * 1.25)
        ax.plot([lo, hi], [lo, hi], color="grey", ls="--", lw=1, label=f"{what} = measured")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured step time (ms, log scale)")
        ax.set_ylabel(f"{what} step time (ms, log scale)")
        ax.set_title(f"{platform} (n = {len(rows)})", fontsize=10)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=12)
    fig.tight_layout()
    return fig


def replay_curves(table: pd.DataFrame, full_mape: float, title: str) -> plt.Figure:
    """Error on the unmeasured rest against the share of the grid measured, adaptive and random (mean, min-max over seeds)."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for strategy, rows in table.groupby("strategy"):
        stats = rows.groupby("fraction")["mape"].agg(["mean", "min", "max"])
        ax.plot(stats.index * 100, stats["mean"], marker="o", label=strategy)
        ax.fill_between(stats.index * 100, stats["min"], stats["max"], alpha=0.2)
    ax.axhline(full_mape + 2, color="grey", ls="--", lw=1, label=f"full-data model + 2 points ({full_mape + 2:.1f}%)")
    ax.set_xlabel("share of the grid measured (%)")
    ax.set_ylabel("MAPE on the unmeasured rest (%)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


EVIDENCE_COLOURS = {
    "measured": "#7fc97f",
    "datasheet": "#80b1d3",
    "paper's class rating": "#e0e0e0",
    "not measurable here": "#ffffff",
}


def scorecard_matrix(cells: pd.DataFrame, title: str) -> plt.Figure:
    """Dai & Berleant's hardware metrics (rows) per platform (columns): each cell coloured by where its
    value comes from and labelled with it in a few words (``scorecard.hardware_metrics``' long form)."""
    metrics = list(dict.fromkeys(cells["metric"]))
    platforms = list(dict.fromkeys(cells["platform"]))
    fig, ax = plt.subplots(figsize=(2.3 * len(platforms) + 2.6, 0.42 * len(metrics) + 1.6))
    for _, c in cells.iterrows():
        x, y = platforms.index(c["platform"]), len(metrics) - 1 - metrics.index(c["metric"])
        ax.add_patch(Rectangle((x - 0.48, y - 0.45), 0.96, 0.9, facecolor=EVIDENCE_COLOURS[c["evidence"]], edgecolor="#999999"))
        ax.text(x, y, c["short"], ha="center", va="center", fontsize=7.5)
    ax.set_xlim(-0.5, len(platforms) - 0.5)
    ax.set_ylim(-0.5, len(metrics) - 0.5)
    classes = cells.drop_duplicates("platform").set_index("platform")["class"]
    ax.set_xticks(range(len(platforms)), [f"{p}\n({classes[p]})" for p in platforms], fontsize=8)
    ax.set_yticks(range(len(metrics)), metrics[::-1], fontsize=8)
    ax.set_xlabel("platform in the store (device class)")
    ax.set_ylabel("hardware metric (Table I)")
    handles = [Rectangle((0, 0), 1, 1, facecolor=colour, edgecolor="#999999") for colour in EVIDENCE_COLOURS.values()]
    ax.legend(handles, list(EVIDENCE_COLOURS), fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), title="value from")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def whiskers(centre: pd.Series, low: pd.Series, high: pd.Series) -> np.ndarray:
    """Error-bar lengths below and above ``centre`` for ``errorbar``'s ``yerr``, never negative: a
    geometric mean lies within its range, but of one configuration it can miss it by a rounding."""
    return np.clip(np.vstack([centre - low, high - centre]), 0, None)


def framework_speed_bars(speeds: pd.DataFrame, title: str, baseline: str = "TensorFlow") -> plt.Figure:
    """Geometric-mean throughput ratio of each framework over ``baseline`` per family, platform and
    mode (compiled or not), whiskers its 95% interval (``low``, ``high``; min to max where there is
    none), on a log2 scale; one colour per framework."""
    from paradnn.settings import FRAMEWORK_TITLES

    fig, ax = plt.subplots(figsize=(max(7, 1.4 * len(speeds) + 2), 4.6))
    labels = [
        f"{families.get(f).title if f in families.names() else f}, {m}\n{p}, {d}\n(n = {n})"
        for f, m, p, d, n in zip(speeds["family"], speeds["mode"], speeds["platform"], speeds["dtype"], speeds["n"])
    ]
    x = np.arange(len(speeds))
    targets = list(dict.fromkeys(speeds["target"]))
    colours = [sns.color_palette()[targets.index(t)] for t in speeds["target"]]
    ax.bar(x, speeds["geomean"], color=colours, width=0.6)
    low, high = ("low", "high") if {"low", "high"} <= set(speeds) else ("min", "max")
    err = whiskers(speeds["geomean"], speeds[low], speeds[high])
    ax.errorbar(x, speeds["geomean"], yerr=err, fmt="none", color="black", capsize=4, lw=1)
    ax.axhline(1, color="grey", ls="--", lw=1)
    ax.set_yscale("log", base=2)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_xlabel("family, mode, platform and dtype (configurations measured under both)")
    ax.set_ylabel(f"throughput framework / {baseline}\n(x, log2 scale)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=sns.color_palette()[i]) for i in range(len(targets))]
    ax.legend(handles, [FRAMEWORK_TITLES.get(t, t) for t in targets], title="framework", fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def version_speedups(table: pd.DataFrame, title: str) -> plt.Figure:
    """Paper Fig. 12a: each version's geometric-mean speedup over the oldest (and the one before it),
    with 95% bootstrap intervals; one colour per family, dtype and XLA setting (log2 scale)."""
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * table["target"].nunique() + 3), 4))
    from paradnn.analysis.rows import version_key

    versions = sorted(set(table["baseline"]) | set(table["target"]), key=version_key)
    groups = list(table.groupby(["family", "dtype", "xla"]))
    for i, ((family, dtype, xla), rows) in enumerate(groups):
        offset = (i - (len(groups) - 1) / 2) * 0.12
        for against, marker in (("oldest", "o"), ("previous", "s")):
            part = rows[rows["against"] == against]
            if part.empty:
                continue
            x = np.array([versions.index(v) for v in part["target"]]) + offset + (0.04 if against == "previous" else 0)
            err = whiskers(part["geomean"], part["low"], part["high"])
            ax.errorbar(
                x,
                part["geomean"],
                yerr=err,
                fmt=marker,
                capsize=3,
                color=sns.color_palette()[i % 10],
                label=f"{family}, {dtype}, XLA {'on' if xla else 'off'}: over the {against}",
            )
    ax.axhline(1, color="grey", ls="--", lw=1)
    ax.set_xticks(range(len(versions)), versions)
    ax.set_yscale("log", base=2)
    low, high = min(table["low"].min(), 1.0), max(table["high"].max(), 1.0)
    ax.set_ylim(low / 1.25, high * 1.25)  # room for more than one tick around 1x
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.3g}x"))
    ax.yaxis.set_minor_formatter(plt.FuncFormatter(lambda v, _: f"{v:.3g}x"))
    ax.set_xlabel("TensorFlow version")
    ax.set_ylabel("speedup in examples/s\n(x, log2 scale; 95% interval)")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fig.tight_layout()
    return fig


def projected_speedups(same: pd.DataFrame, doubled: pd.DataFrame, summary: dict, title: str) -> plt.Figure:
    """Fig. 6b, projected: each configuration's speedup against its operational intensity on the
    source platform, at its own batch and at twice it, with the ridge point and both datasheet ratios."""
    src, dst = summary["from"], summary["to"]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    ax.scatter(same["intensity"], same["speedup"], s=14, label="same batch", color="tab:blue")
    if len(doubled):
        ax.scatter(doubled["intensity"], doubled["speedup"], s=14, marker="^", label="doubled batch", color="tab:orange")
    ax.set_xscale("log")
    ax.axvline(src["flops"] / src["bandwidth"], color="grey", ls=":", lw=1)
    ax.text(
        src["flops"] / src["bandwidth"],
        0.98,
        f" ridge {src['flops'] / src['bandwidth']:.0f} FLOPs/byte",
        transform=ax.get_xaxis_transform(),
        fontsize=8,
        color="grey",
        va="top",
        ha="left",
    )
    for ratio, name in ((summary["peak_ratio"], "peak ratio"), (summary["bandwidth_ratio"], "bandwidth ratio")):
        ax.axhline(ratio, color="black", ls="--", lw=0.8)
        ax.annotate(f"{name} {ratio:.2f}x", (ax.get_xlim()[0], ratio), fontsize=8, va="bottom")
    ax.set_xlabel(f"operational intensity on {src['platform']} (FLOPs/byte, log scale)")
    ax.set_ylabel(f"projected speedup, {dst['platform']} over {src['platform']} (x)")
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig
