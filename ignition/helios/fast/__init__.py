"""The bounded search plan() runs: ``decide``'s choice, found fast."""
