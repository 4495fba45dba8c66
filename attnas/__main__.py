"""``python -m attnas`` runs the command line."""

from attnas.cli import main

main()
