"""Shared figure helpers of the reproduce entries."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

from reproduce import plotting  # noqa: E402


def _minor_labels(ax):
    ax.figure.canvas.draw()
    return [t.get_text() for t in ax.yaxis.get_minorticklabels() if t.get_text()]


def test_minor_labels_thinned_by_the_decades_in_view():
    fig, axes = plt.subplots(1, 3)
    for ax, (lo, hi) in zip(axes, [(0.08, 2.2), (0.28, 2.3), (0.3, 0.9)]):
        ax.plot([0, 1], [lo, hi])
        ax.set_yscale("log")
        ax.set_ylim(lo, hi)
    plotting.no_minor_labels(fig)
    assert isinstance(axes[0].yaxis.get_minor_formatter(), NullFormatter)   # 0.1 and 1 in view
    assert _minor_labels(axes[0]) == []
    one = _minor_labels(axes[1])                                           # only 1 in view
    assert one and all(label.replace("$", "").lstrip("0.")[0] in "25" for label in one)
    assert len(_minor_labels(axes[2])) >= 3                                # no decade: all
    plt.close(fig)
