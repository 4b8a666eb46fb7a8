"""``python -m dashboard``: serve the app (see ``dashboard.launch``)."""

from dashboard.launch import main

main()
