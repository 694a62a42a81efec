"""Jinja2 templates and the stylesheet of the report (package data)."""
