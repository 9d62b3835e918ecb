"""Provider adapters behind one narrow seam (see base.Provider)."""
