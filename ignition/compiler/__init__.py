"""The graph-capture compiler: program builders per descriptor kind and the build pipeline."""
