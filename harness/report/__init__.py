"""Reports a person would rather look at: figures (pure DataFrame -> Figure), tables, and a renderer
writing report.md and one self-contained report.html (`ddlbench report RUN [RUN ...] -o reports/NAME`).

    data.py           merging runs, picking measured/predicted/failed rows
    figures.py        (a) throughput vs workers, (b) efficiency heat map, (c) grouped bars, (d) breakdown
    figures_model.py  (e) commbench busbw vs size with the alpha-beta fit, (f) predicted vs measured
    tables.py         summary, failed cells, workloads, environment, fits, prediction errors
    render.py         Markdown + HTML (images inlined as base64 PNG data URIs)
"""
