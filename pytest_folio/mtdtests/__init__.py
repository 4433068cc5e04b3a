"""mtdtests"""
