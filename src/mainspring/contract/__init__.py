"""The plugin contract: what a plugin implements and what it is handed.

- :mod:`~mainspring.contract.hookspecs`: every hook, its parameters and meaning;
- :mod:`~mainspring.contract.table`: each hook's rules as data (how results combine,
  what a failure or a stall means, the capability it needs);
- :mod:`~mainspring.contract.markers`: ``hookimpl`` and the marks stacked under it;
- :mod:`~mainspring.contract.decisions`: what gates, approvers, ``compact`` and
  ``prepare_next_turn`` return;
- :mod:`~mainspring.contract.errors`: the errors the kernel raises and plugins may raise;
- :mod:`~mainspring.contract.agent_view`: the :class:`~mainspring.AgentView` protocol a
  hook's ``agent`` has; :mod:`~mainspring.contract.state`: the ``AgentState`` snapshot;
  :mod:`~mainspring.contract.plugin_info`: the record of a registered plugin.

The contract depends only on messages, providers, tools and events, never on the kernel
or the agent that implement it.
"""
