"""Says whether samples are digits: a classifier trained on the real digits
(the training 80%) labels them, and their nearest-neighbour distance to the
training digits is compared with that of held-out real digits.

usage: python3 evaluate.py samples.npy
  samples.npy: N x 64 float32 from `flowgen sample` (values in [-1, 1])
"""
import sys

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import NearestNeighbors

from train import split


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    samples = np.load(sys.argv[1]).astype(np.float64)
    train, train_labels, held, held_labels = split()
    classifier = LogisticRegression(max_iter=5000, C=0.5).fit(train, train_labels)
    accuracy = classifier.score(held, held_labels)

    def confidence(x):
        return classifier.predict_proba(x).max(axis=1)

    neighbours = NearestNeighbors(n_neighbors=1).fit(train)

    def nearest(x):
        return neighbours.kneighbors(x)[0][:, 0]

    noise = np.random.default_rng(1).standard_normal(samples.shape)
    labels = classifier.predict(samples)
    ratio = nearest(samples).mean() / nearest(held).mean()
    print(f"classifier accuracy on held-out real digits: {accuracy:.3f}")
    print(f"mean classifier confidence: samples {confidence(samples).mean():.3f}, "
          f"held-out real digits {confidence(held).mean():.3f}, "
          f"N(0, I) noise {confidence(noise).mean():.3f}")
    print(f"samples labelled with confidence >= 0.9: {(confidence(samples) >= 0.9).mean():.3f}")
    print(f"nearest-neighbour distance to the training digits, samples / held-out: {ratio:.3f} "
          f"(noise / held-out: {nearest(noise).mean() / nearest(held).mean():.3f})")
    print("labels of the samples:", np.bincount(labels, minlength=10).tolist())


if __name__ == "__main__":
    main()
