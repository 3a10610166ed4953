"""manifests part of mpstream."""
