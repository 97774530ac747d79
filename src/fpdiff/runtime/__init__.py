"""Jobs and where they run: the task a backend sees, worker processes, cache, scratch."""
