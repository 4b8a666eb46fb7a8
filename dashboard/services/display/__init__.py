"""What figures and pages share: block reduction of large matrices (``reduce``), colour-mapped
PNG images of them (``image``), the text of a static table (``table``), and user text shown
literally in Markdown and plotly (``text``: ``literal``, ``html_literal``)."""
