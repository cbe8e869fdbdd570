"""Built-in plugins: ordinary plugin modules registered by the kernel from its own list.

See :data:`mainspring.kernel.plugins.BUILTIN_PLUGINS` for the list and which are essential.
"""
