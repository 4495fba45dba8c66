"""Running more than one process: parallel pieces of a search (`parallel`, in-process or on Ray), data-parallel training (`distributed`) and sweeps of independent searches (`sweep`)."""
