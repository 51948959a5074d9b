"""Helpers shared by the tests (imported as ``tests.support.<module>``); no tests here."""
