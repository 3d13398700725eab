"""A local package installed into a virtual environment with pip, offline."""
import sys


def hello():
    return "python: hello from greet in " + sys.prefix


def main():
    print(hello())
