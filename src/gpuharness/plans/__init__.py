"""Plans of provider mutations: plan files, rehearsal, apply, cassettes, recordings and inventory."""
