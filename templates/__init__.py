"""The jinja2 templates generator/builder/render.py fills. Shipped as package data of ``generator.templates``."""
