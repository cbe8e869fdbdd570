"""Built-in plugins: ordinary plugin modules registered by the kernel from its own list.

See :data:`mainspring.loading.builtins.BUILTIN_PLUGINS` for the list and which are essential.
"""
