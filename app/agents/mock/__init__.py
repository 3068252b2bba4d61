"""The built-in `mock` ACP agent (run as ``python -m app.agents.mock``)."""
