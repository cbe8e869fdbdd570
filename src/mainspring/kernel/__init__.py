"""The engine: the run loop, state, events, tool executor, stream assembly, hook relay."""
