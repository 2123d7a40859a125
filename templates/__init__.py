"""The jinja2 templates generator/render.py fills. Shipped as package data of ``generator.templates``."""
