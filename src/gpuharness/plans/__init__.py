"""Plans of provider mutations: plan files and their rules, rehearsal and replay, apply, and the recorded world."""
