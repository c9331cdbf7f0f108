# Verdicts as data. Between the Measurements and the renderers: which is faster or whether two
# are a tie, a ranking, a share, a slope, a bound, a distribution, a forecast from a data
# sheet — decided once here, as frozen values without words. render/words.py says them.
# No torch, no rendering.
