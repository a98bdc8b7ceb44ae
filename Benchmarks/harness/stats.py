"""Medians, spreads and how figures are printed."""

import statistics


def summarize(samples):
    return {"samples": samples, "median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def format_value(value, unit):
    if value is None:
        return "–"
    if unit == "msgs/s":
        return f"{value:,.0f}"
    if unit in ("MB/s",):
        return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"
    if unit in ("µs",):
        return f"{value:,.1f}"
    if unit == "ms":
        return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"
    return f"{value:.3g}"


def format_figure(figure):
    if figure is None or figure.get("status") != "ok":
        return "unavailable"
    unit = figure["unit"]
    text = f"{format_value(figure['median'], unit)} {unit}"
    if len(figure["samples"]) > 1:
        text += f" ({format_value(figure['min'], unit)}–{format_value(figure['max'], unit)})"
    return text
