"""The diagnostic scheduler of `ignition debug-serve --direct`."""
