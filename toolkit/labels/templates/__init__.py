"""The review page's template, script and stylesheet (package data)."""
