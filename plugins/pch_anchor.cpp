// Anchor for the plugins' shared precompiled header; no code.
