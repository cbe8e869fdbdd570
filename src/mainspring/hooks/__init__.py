"""Calling plugin code: the hook table, call plans, the guard, the one call path."""
