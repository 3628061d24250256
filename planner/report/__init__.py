"""Stage 7, Report: renderers only (text, JSON, CSV, Markdown, HTML, SVG) and run folders."""
