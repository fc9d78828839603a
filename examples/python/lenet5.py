"""The README's main job in Python: LeNet-5 on Fashion-MNIST, data-parallel, from NumPy arrays.

    PYTHONPATH=build/python build/bin/tnt-launch -n 2 -- /usr/bin/python3 examples/python/lenet5.py

It trains what `tnt-train conf/lenet5_fashion_mnist.toml` trains: the same model, seed, global
batch, epochs, optimizer and schedule, on the same bytes (the data set's uint8 pixels, normalised
by tnt with the run's mean and std), so the final weights are bitwise those of tnt-train
(tests/python: python.lenet5_bitwise).
"""
import argparse

import tnt

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--max-steps", type=int, default=0, help="stop after this many optimizer steps (0: no limit)")
parser.add_argument("--threads", type=int, default=1, help="compute threads per rank")
parser.add_argument("--save-weights", help="write the trained weights to this file (master rank)")
parser.add_argument("--loss-curve", help="write a PNG of the loss per step to this file (master rank)")
args = parser.parse_args()

tnt.init(threads=args.threads)
(x_train, y_train), (x_test, y_test) = tnt.data.fashion_mnist.load_data()  # uint8, as in the IDX files

model = tnt.Model.from_zoo("lenet5", seed=42)
# 938 steps per epoch at batch 64: halve the rate after epochs 2 and 3.
schedule = tnt.optimizers.schedules.PiecewiseConstantDecay([1876, 2814], [0.002, 0.001, 0.0005])
model.compile(optimizer=tnt.optimizers.Adam(learning_rate=schedule),
              loss=tnt.losses.SparseCategoricalCrossentropy(), metrics=["accuracy"])

callbacks = []
if args.loss_curve:
    from loss_curve import LossCurve  # examples/python/loss_curve.py
    callbacks.append(LossCurve(args.loss_curve))

history = model.fit(x_train, y_train, batch_size=64, epochs=args.epochs, validation_data=(x_test, y_test),
                    mean=[0.2860], std=[0.3530], max_steps=args.max_steps, callbacks=callbacks)
loss, accuracy = model.evaluate(x_test, y_test, batch_size=1000)
if tnt.is_master_rank():
    print(f"trained {history.steps} steps in {history.seconds:.2f} s: {history.samples_per_second:.1f} samples/s")
    print(f"test loss: {loss:.4f}")
    print(f"test accuracy: {accuracy:.4f}")
if args.save_weights:
    model.save_weights(args.save_weights)
