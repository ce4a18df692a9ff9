"""Tests of deploy/: the image, compose file and Kubernetes manifests, and scale-out for real."""
