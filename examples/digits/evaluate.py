"""Says whether samples are digits: a classifier trained on the real digits
(the training 80%) labels them, and their nearest-neighbour distance to the
training digits is compared with that of held-out real digits.

usage: python3 evaluate.py samples.npy [--classes]
  samples.npy: N x 64 float32 from `flowgen sample` (values in [-1, 1])
  --classes: the samples were drawn for the classes 0 to 9 in turn, N / 10
             each (`flowgen sample --class all`, the conditional model):
             also print the classifier's accuracy on the requested class
"""
import sys

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import NearestNeighbors

from train import split


def train_classifier():
    """The classifier of real digits (the training 80%)."""
    train, train_labels, _, _ = split()
    return LogisticRegression(max_iter=5000, C=0.5).fit(train, train_labels)


def class_accuracy(classifier, samples, requested):
    """The fraction of samples labelled as the class they were drawn for,
    overall and per class (a list of 10)."""
    labels = classifier.predict(samples)
    hits = labels == requested
    return hits.mean(), [hits[requested == k].mean() for k in range(10)]


def main():
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] != "--classes"):
        sys.exit(__doc__)
    samples = np.load(sys.argv[1]).astype(np.float64)
    train, _, held, held_labels = split()
    classifier = train_classifier()
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
    if len(sys.argv) == 3:
        if len(samples) % 10:
            sys.exit(f"evaluate: --classes needs N divisible by 10, not {len(samples)}")
        requested = np.repeat(np.arange(10), len(samples) // 10)
        total, per_class = class_accuracy(classifier, samples, requested)
        print(f"accuracy on the requested class: {total:.3f} (per class: "
              f"{' '.join(f'{a:.2f}' for a in per_class)})")


if __name__ == "__main__":
    main()
