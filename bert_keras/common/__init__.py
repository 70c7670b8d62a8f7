"""The ground floor: what every other subpackage may use and nothing here imports from them.

    files    writing a file so that it exists complete or not at all
"""
