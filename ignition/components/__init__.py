"""Build-time components: capacity enumeration and the descriptor catalog."""
