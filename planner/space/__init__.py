"""Stage 2, Space: the search axes, each declared once (axes.py), and their choice lists (space.py)."""
